package watchdog

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// submitMany puts n jobs named prefix0000... into the spool, held or queued.
func submitMany(t *testing.T, s *job.Spool, prefix string, n int, held bool) {
	t.Helper()
	reqs := make([]job.SubmitRequest, n)
	for i := range reqs {
		reqs[i] = job.SubmitRequest{ID: fmt.Sprintf("%s%04d", prefix, i), Kind: "noop", Prompt: []byte(`{}`), Held: held}
	}
	_, errs := s.SubmitMany(reqs)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A dead agent's job is recovered, and the watchdog is ready, before the
// startup reconcile has read one job of incoming/: the reconcile of the
// queue and of the other big directories runs after the first check, in
// steps, instead of before it.
func TestRunRecoversBeforeTheQueueIsReconciled(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Interval: time.Hour, StartupChunk: 16})
	submitMany(t, e.s, "q", 200, false)
	submitMany(t, e.s, "h", 50, true)
	// An operator's retry cut short: killed, but back in incoming/. The
	// part after ready still repairs it.
	patch(t, e.s.JobDir(job.Queued, "", "q0150"), func(j *job.Job) { j.Status = job.Killed })
	e.claim(t, "dead")
	o := job.NewOwner(holder.Actor, holder.Agent)
	o.PID = deadPID(t)
	e.setOwner(t, "dead", o)

	// Both run on the loop's goroutine, and are read after Run returned.
	ready := make(chan struct{})
	var readyAt, queuedChecks, heldChecks int
	recoveredAt := -1
	e.w.cfg.Ready = func() {
		readyAt = queuedChecks
		close(ready)
	}
	e.w.onStartupCheck = func(state job.State, id string) {
		if state == job.Queued && recoveredAt < 0 {
			if locs, err := e.s.Locate("dead"); err == nil && len(locs) == 1 && locs[0].State == job.Stale {
				recoveredAt = queuedChecks
			}
		}
		switch state {
		case job.Queued:
			queuedChecks++
		case job.Held:
			heldChecks++
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.w.Run(ctx) }()
	deadline := time.After(20 * time.Second)
	for !strings.Contains(e.log.String(), "startup reconcile done") {
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-deadline:
			t.Fatalf("startup reconcile not done after 20s:\n%s", e.log)
		case <-time.After(5 * time.Millisecond):
		}
	}
	<-ready
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if recoveredAt != 0 {
		t.Fatalf("dead holder's job recovered after %d jobs of incoming/ were read (-1: not before the pass ended); want before the first", recoveredAt)
	}
	if readyAt != 0 {
		t.Fatalf("ready after %d jobs of incoming/ were read; want before the first", readyAt)
	}
	if queuedChecks != 200 || heldChecks != 50 {
		t.Fatalf("startup reconcile read %d queued and %d held jobs, want 200 and 50", queuedChecks, heldChecks)
	}
	if st, _ := e.where(t, "dead"); st != job.Stale {
		t.Fatalf("dead holder's job in %s, want stale", st)
	}
	if st, _ := e.where(t, "q0150"); st != job.Killed {
		t.Fatalf("killed job found in incoming/ left in %s, want killed", st)
	}
}

// After the startup, a rescan relists at most ListChunk names of
// incoming/ for locks; a lap over a big queue spans several rescans and
// still learns every lock.
func TestLockRelistingIsBoundedPerRescan(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{ListChunk: 4})
	submitMany(t, e.s, "q", 6, false)
	for i := range 6 {
		if err := os.Mkdir(e.s.LockPath(fmt.Sprintf("q%04d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.w.lockLap = true
	for step := 1; e.w.lockLap; step++ {
		before := len(e.w.locks)
		e.w.relistLocks(e.w.cfg.ListChunk)
		if got := len(e.w.locks) - before; got > 4 {
			t.Fatalf("step %d learned %d locks from one relisting of 4 names", step, got)
		}
		if step > 4 { // the fourth finds the end
			t.Fatalf("lap of 12 names by 4 not over after %d steps", step)
		}
	}
	if len(e.w.locks) != 6 {
		t.Fatalf("lap learned %d locks, want 6: %v", len(e.w.locks), e.w.locks)
	}
}
