package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/manager"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// An operator's hold of a running job costs no attempt, as a drain
// release does not: a job with max_attempts 2 that failed once, then was
// held while running its second attempt and released, still gets its
// second real attempt (with managerd's policy running beside the agent).
func TestHoldOfRunningJobCostsNoAttempt(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	started := make(chan int32, 4)
	h := HandlerFunc(func(ctx context.Context, tk Task) Result {
		n := runs.Add(1)
		started <- n
		switch n {
		case 1:
			return Result{Err: errors.New("first attempt fails")}
		case 2:
			<-ctx.Done() // held by the operator
			return Result{Err: context.Cause(ctx)}
		}
		return Result{Err: errors.New("second real attempt fails too")}
	})
	f := setup(t, Config{ControlPoll: 20 * time.Millisecond, Handlers: map[string]Handler{"flaky": h}})
	m := manager.New(spoolstore.New(f.spool), manager.Config{MaxAttempts: 5, BackoffBase: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond, Rescan: 50 * time.Millisecond}, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	mdone := make(chan error, 1)
	go func() { mdone <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-mdone; err != nil {
			t.Errorf("manager Run: %v", err)
		}
	})
	if _, err := f.spool.Submit(job.SubmitRequest{ID: "h2", Kind: "flaky", MaxAttempts: 2, Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	<-started
	if n := <-started; n != 2 {
		t.Fatalf("run %d, want the second", n)
	}
	if err := f.spool.RequestControl("t1", "h2", job.Control{Action: job.ControlHold, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	held := f.waitState(t, "h2", job.Held)
	if held.Attempts != 1 {
		t.Fatalf("held job counts %d attempts, want 1 (the held attempt is not counted)", held.Attempts)
	}
	if _, err := f.spool.Move("h2", job.Held, job.Queued, "test", "released by operator", nil); err != nil {
		t.Fatal(err)
	}
	if n := <-started; n != 3 {
		t.Fatalf("run %d, want the third", n)
	}
	killed := f.waitState(t, "h2", job.Killed)
	if killed.Attempts != 2 || killed.Reason != "failed 2 times: out of attempts" {
		t.Fatalf("killed with attempts %d (%q), want 2 (%q)", killed.Attempts, killed.Reason, "failed 2 times: out of attempts")
	}
	if n := runs.Load(); n != 3 {
		t.Fatalf("%d runs, want 3", n)
	}
}
