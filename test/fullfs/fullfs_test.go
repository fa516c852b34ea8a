// Package fullfs runs farro's transactions on a spool whose file system
// fills up while jobs are submitted, claimed, committed and recovered: a
// size-limited tmpfs that the test mounts (it needs root, as CI has; it
// fails, never skips, without it). Every job must survive, and finish
// once space returns.
package fullfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/watchdog"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// mountSmall mounts a tmpfs of size bytes (and few inodes) at a fresh
// directory and unmounts it when the test ends.
func mountSmall(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	opts := fmt.Sprintf("size=%d,nr_inodes=4096,mode=0755", size)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Fatalf("mount a size-limited tmpfs at %s: %v (this test needs root: CI runs as root)", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill takes every free block and inode of the file system holding dir,
// and returns a function that gives them back.
func fill(t *testing.T, dir string) (free func()) {
	t.Helper()
	ballast := filepath.Join(dir, "ballast")
	if err := os.Mkdir(ballast, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(ballast, "blocks"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling: %v", err)
			}
			break
		}
	}
	f.Close()
	for i := 0; ; i++ {
		g, err := os.Create(filepath.Join(ballast, fmt.Sprint(i)))
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling inodes: %v", err)
			}
			break
		}
		g.Close()
	}
	return func() {
		if err := os.RemoveAll(ballast); err != nil {
			t.Fatalf("freeing space: %v", err)
		}
	}
}

// TestFullDisk: jobs are running when the spool's file system fills up.
// While it is full, submit fails with a clear error and changes nothing,
// claims fail and leave their jobs queued, commits fail and are retried,
// recovery fails and is retried; once space returns every job finishes,
// exactly once, and nothing is left locked.
func TestFullDisk(t *testing.T) {
	root := mountSmall(t, 8<<20)
	s, err := job.Open(filepath.Join(root, "spool"))
	if err != nil {
		t.Fatal(err)
	}
	const jobs = 40
	for i := range jobs {
		if _, err := s.Submit(job.SubmitRequest{ID: fmt.Sprintf("j%02d", i), Kind: "gated", Prompt: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// A handler that waits at a gate, so that jobs are mid-run when the
	// disk fills, and counts its executions.
	gate := make(chan struct{})
	var mu sync.Mutex
	runs := map[string]int{}
	gated := agent.HandlerFunc(func(ctx context.Context, task agent.Task) agent.Result {
		mu.Lock()
		runs[task.Env.Lifecycle.ID]++
		mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
			return agent.Result{Err: ctx.Err()}
		}
		return agent.Result{}
	})
	a, err := agent.New(agent.Config{Spool: s, ID: "w1", Concurrency: 3, Handlers: map[string]agent.Handler{"gated": gated},
		Rescan: 100 * time.Millisecond, Heartbeat: 100 * time.Millisecond, DrainTimeout: 5 * time.Second, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	var wlog syncBuf
	w := watchdog.New(spoolstore.New(s), watchdog.Config{Interval: 50 * time.Millisecond, CrashThreshold: 30 * time.Second, LockGrace: time.Second, Rescan: time.Second}, zerolog.New(&wlog))
	defer func() {
		if t.Failed() {
			t.Logf("watchdog log:\n%s", wlog.String())
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Run(ctx) }()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ctx.Err() == nil {
			_ = w.RunOnce(ctx)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	waitFor(t, "3 jobs running", func() bool { return a.Busy() == 3 })

	// A job whose agent died holding it: recovery runs into the full
	// disk, and must finish once space returns.
	if _, err := s.Submit(job.SubmitRequest{ID: "orphan", Kind: "other", Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	oc, err := s.Claim("orphan", job.Holder{Actor: "agentd/w0", Agent: "w0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("orphan claimed with token %s", oc.Token())
	free := fill(t, root)
	o := job.NewOwner("agentd/w0", "w0")
	o.PID = deadPID(t)
	ob, _ := json.Marshal(o)
	// The owner file already has its blocks: rewriting it in place
	// needs no new space.
	if err := os.WriteFile(filepath.Join(s.LockPath("orphan"), fsq.OwnerFile), ob, 0o644); err != nil {
		t.Fatal(err)
	}
	// Submit while full: a clear error, nothing left behind.
	_, err = s.Submit(job.SubmitRequest{ID: "late", Kind: "gated", Prompt: []byte(`{}`)})
	if err == nil {
		t.Fatal("submit on a full disk succeeded")
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("submit on a full disk: %v, want an error that says ENOSPC", err)
	}
	if _, lerr := s.Locate("late"); !errors.Is(lerr, job.ErrNotFound) {
		t.Fatalf("a refused submit left a job: %v", lerr)
	}
	// The handlers finish: their commits meet the full disk, and the
	// agent's free slots try to claim.
	close(gate)
	time.Sleep(time.Second)
	counts := states(t, s)
	if counts[job.Succeeded] == jobs {
		t.Fatal("every job finished on a full disk: the disk was not full")
	}
	if counts[job.Stale] != 0 {
		t.Fatal("the orphan was recovered on a full disk: the disk was not full")
	}
	free()
	// The orphan is recovered when its lock is gone and job.json says
	// stale (a recovery cut by the full disk may have moved it already).
	waitFor(t, "every job succeeded, and the orphan recovered, once space returned", func() bool {
		c := states(t, s)
		if c[job.Succeeded] != jobs || c[job.Stale] != 1 {
			return false
		}
		j, err := job.ReadJob(s.JobDir(job.Stale, "", "orphan"))
		_, lerr := os.Lstat(s.LockPath("orphan"))
		return err == nil && j.Status == job.Stale && os.IsNotExist(lerr)
	})
	cancel()
	if err := <-agentDone; err != nil {
		t.Errorf("agent: %v", err)
	}
	<-watchDone
	mu.Lock()
	defer mu.Unlock()
	for id, n := range runs {
		if n != 1 {
			t.Errorf("%s ran %d times", id, n)
		}
	}
	if len(runs) != jobs {
		t.Errorf("%d jobs ran, want %d", len(runs), jobs)
	}
	ents, err := os.ReadDir(s.StateDir(job.Queued))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("incoming/ not empty at the end: %s", e.Name())
		if b, err := os.ReadFile(filepath.Join(s.StateDir(job.Queued), e.Name(), fsq.OwnerFile)); err == nil {
			t.Logf("its owner: %s", b)
		}
	}
	t.Logf("full disk: %d jobs, states while full %v", jobs, counts)
}

// deadPID is the pid of a child that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.Pid()
}

func states(t *testing.T, s *job.Spool) map[job.State]int {
	t.Helper()
	out := map[job.State]int{}
	for _, st := range job.States {
		if st == job.InProgress {
			continue
		}
		ents, err := os.ReadDir(s.StateDir(st))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() && job.ValidateID(e.Name()) == nil {
				out[st]++
			}
		}
	}
	return out
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}
