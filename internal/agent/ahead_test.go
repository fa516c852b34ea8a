package agent

import (
	"context"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// While handlers are short a slot claims several jobs at once; those it
// has not started when the agent stops go back to incoming/ without an
// attempt, like a drained job.
func TestClaimAheadAndReleaseOnStop(t *testing.T) {
	t.Parallel()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"b1", "n1", "n2", "n3"}
	for i, id := range ids {
		kind := "noop"
		if i == 0 {
			// The oldest: claimed first, and blocks the slot. (Of a
			// higher priority, it would be claimed from its hint
			// before the listing of incoming/ is done, alone.)
			kind = "block"
		}
		if _, err := s.Submit(job.SubmitRequest{ID: id, Kind: kind, Prompt: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	started := make(chan string, 1)
	a, err := New(Config{Spool: s, ID: "t1", Concurrency: 1, DrainTimeout: 100 * time.Millisecond,
		Handlers: map[string]Handler{"block": blocker(started), "noop": Noop}, Log: testLog(t, "t1")})
	if err != nil {
		t.Fatal(err)
	}
	a.noteRun(time.Microsecond) // recent handlers were short
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("the blocking job never started")
	}
	for _, id := range ids {
		locs, err := s.Locate(id)
		if err != nil || len(locs) != 1 || locs[0].State != job.InProgress {
			t.Errorf("%s: %v %v; want it claimed with the first (one barrier, one slot)", id, locs, err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		locs, err := s.Locate(id)
		if err != nil || len(locs) != 1 || locs[0].State != job.Queued {
			t.Fatalf("%s after stop: %v %v; want queued", id, locs, err)
		}
		j, err := job.ReadJob(locs[0].Dir)
		if err != nil || j.Status != job.Queued || j.Attempts != 0 {
			t.Errorf("%s after stop: %+v, %v; want queued with no attempt", id, j, err)
		}
	}
}
