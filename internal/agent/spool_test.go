package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// submitN submits n noop jobs of priority prio in one group commit.
func submitN(t testing.TB, s *job.Spool, n, prio int) []*job.Job {
	t.Helper()
	reqs := make([]job.SubmitRequest, n)
	for i := range reqs {
		reqs[i] = job.SubmitRequest{Kind: "noop", Priority: prio, Prompt: []byte(`{}`)}
	}
	jobs, errs := s.SubmitMany(reqs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	return jobs
}

// An agent that starts on a long queue claims the one high-priority job
// first (that its store's index reads few job.json files for it is
// spoolstore's test).
func TestAgentStartClaimsPriorityFirst(t *testing.T) {
	t.Parallel()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	submitN(t, s, n, 0)
	high := submitN(t, s, 1, 5)[0]
	first := make(chan string, 1)
	rec := HandlerFunc(func(_ context.Context, tk Task) Result {
		select {
		case first <- tk.Env.Lifecycle.ID:
		default:
		}
		return Result{}
	})
	a, err := New(Config{Spool: s, ID: "t1", Handlers: map[string]Handler{"noop": rec}, Log: testLog(t, "t1")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var id string
	select {
	case id = <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("no claim within 10 s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if id != high.ID {
		t.Errorf("first claim %s, want the priority-5 job %s", id, high.ID)
	}
}

// A job that ends (succeeded, killed) loses its priority hint at its
// commit; one that failed keeps it (a retry brings it back to incoming/).
func TestCommitDropsHintOfEndedJob(t *testing.T) {
	t.Parallel()
	fail := HandlerFunc(func(context.Context, Task) Result { return Result{Err: fmt.Errorf("no")} })
	f := setup(t, Config{Handlers: map[string]Handler{"noop": Noop, "fail": fail}})
	f.submit(t, "ok1", "noop", 3)
	f.submit(t, "bad1", "fail", 2)
	f.waitState(t, "ok1", job.Succeeded)
	f.waitState(t, "bad1", job.Failed)
	if _, err := os.Lstat(filepath.Join(f.spool.HintDir(), job.HintName(3, "ok1"))); !os.IsNotExist(err) {
		t.Errorf("hint of the succeeded job: %v, want it removed", err)
	}
	if _, err := os.Lstat(filepath.Join(f.spool.HintDir(), job.HintName(2, "bad1"))); err != nil {
		t.Errorf("hint of the failed job: %v, want it kept", err)
	}
}

// parked is how many jobs the agent's spool store holds aside (kinds its
// claims do not ask for).
func (f *fixture) parked() int { return f.agent.cfg.Store.(*spoolstore.Store).Parked() }
