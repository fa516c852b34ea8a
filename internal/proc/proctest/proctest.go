// Package proctest starts processes for tests of recovery: a stand-in
// for a job's handler, the leader of a process group of its own, as
// agentd starts one.
package proctest

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/farro-dev/farro/internal/proc"
)

// Handler starts `sleep 600` as the leader of its own process group and
// returns its identity and a channel closed once it has exited (reaped).
// The group is killed when the test ends.
func Handler(t testing.TB) (proc.Identity, <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-exited })
	id, err := proc.Of(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return id, exited
}
