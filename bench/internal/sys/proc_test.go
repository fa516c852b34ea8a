package sys

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TreeCPU counts a live child's CPU time, which CPUTime of the parent does
// not (a child is in cutime+cstime only once reaped).
func TestTreeCPUCountsLiveChildren(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "i=0; while :; do i=$((i+1)); done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if got := ParentPID(cmd.Process.Pid); got != os.Getpid() {
		t.Fatalf("ParentPID(child) = %d, want %d", got, os.Getpid())
	}
	deadline := time.Now().Add(5 * time.Second)
	var child time.Duration
	for child < 100*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("child used %s of CPU after 5s", child)
		}
		time.Sleep(20 * time.Millisecond)
		c, err := CPUTime(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		child = c
	}
	self, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := TreeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if tree < self+child {
		t.Fatalf("TreeCPU = %s, want at least self %s + live child %s", tree, self, child)
	}
	if ParentPID(1<<30) != -1 {
		t.Fatal("ParentPID of no process is not -1")
	}
}
