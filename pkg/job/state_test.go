package job_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// legal is the legal-transitions map, copied by hand from
// ARCHITECTURE.md, independently of the package's own table.
var legal = map[job.State][]job.State{
	"queued":      {"in-progress", "held", "killed"},
	"in-progress": {"succeeded", "failed", "stale", "held", "killed", "queued"},
	"failed":      {"queued", "deferred", "killed"},
	"stale":       {"queued", "deferred", "killed"},
	"deferred":    {"queued", "held", "killed"},
	"held":        {"queued", "killed"},
	"succeeded":   {},
	"killed":      {},
}

func isLegal(from, to job.State) bool {
	for _, s := range legal[from] {
		if s == to {
			return true
		}
	}
	return false
}

var allStates = []job.State{"queued", "in-progress", "succeeded", "failed", "stale", "killed", "deferred", "held"}

func TestStatesAreTheEight(t *testing.T) {
	t.Parallel()
	if len(job.States) != 8 {
		t.Fatalf("job.States has %d states, want 8", len(job.States))
	}
	seen := map[job.State]bool{}
	for _, s := range job.States {
		seen[s] = true
	}
	for _, s := range allStates {
		if !seen[s] || !s.Valid() {
			t.Errorf("state %q missing or invalid", s)
		}
		if got, want := s.Terminal(), len(legal[s]) == 0; got != want {
			t.Errorf("%s.Terminal() = %v, want %v", s, got, want)
		}
	}
	for _, s := range []job.State{"", "running", "Queued", "completed"} {
		if s.Valid() {
			t.Errorf("%q is Valid", s)
		}
	}
	dirs := map[job.State]string{
		"queued": "incoming", "in-progress": "in-progress", "deferred": "deferred",
		"held": "held", "stale": "stale", "succeeded": "completed/succeeded",
		"failed": "completed/failed", "killed": "completed/killed",
	}
	for s, d := range dirs {
		if s.Dir() != d {
			t.Errorf("%s.Dir() = %q, want %q", s, s.Dir(), d)
		}
	}
}

func TestCanTransitionEveryPair(t *testing.T) {
	t.Parallel()
	n := 0
	for _, from := range allStates {
		for _, to := range allStates {
			want := isLegal(from, to)
			if want {
				n++
			}
			if got := job.CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	if n != 20 {
		t.Fatalf("the architecture's map has %d legal pairs in this table, want 20", n)
	}
	if job.CanTransition("bogus", job.Queued) || job.CanTransition(job.Queued, "bogus") {
		t.Error("a transition involving an unknown state is legal")
	}
}

// TestCommitEveryTarget checks every (in-progress, to) pair through the
// holder's commit: legal targets apply, illegal ones are refused and leave
// the job untouched (still committable).
func TestCommitEveryTarget(t *testing.T) {
	t.Parallel()
	for _, to := range allStates {
		t.Run(string(to), func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			c := claim(t, s, "j1")
			dir := s.JobDir(job.InProgress, "w1", "j1")
			before := tree(t, s.Root)
			err := c.Commit(to, "why", nil)
			if !isLegal(job.InProgress, to) {
				if !errors.Is(err, job.ErrIllegal) {
					t.Fatalf("Commit(%s) = %v, want ErrIllegal", to, err)
				}
				sameTree(t, before, tree(t, s.Root))
				if c.Envelope().Lifecycle.Status != job.InProgress {
					t.Fatal("refused commit changed the in-memory status")
				}
				// Still held, still committable.
				if err := c.Commit(job.Succeeded, "", nil); err != nil {
					t.Fatalf("legal commit after a refused one: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Commit(%s) = %v", to, err)
			}
			dst := s.JobDir(to, "", "j1")
			if got := readJob(t, dst); got.Status != to {
				t.Fatalf("status = %s, want %s", got.Status, to)
			}
			mustNotExist(t, dir)
			mustNotExist(t, s.LockPath("j1"))
		})
	}
}

// TestMoveEveryPair checks every (from, to) pair through Move, the
// transaction of actors that hold no claim.
func TestMoveEveryPair(t *testing.T) {
	t.Parallel()
	for _, from := range allStates {
		for _, to := range allStates {
			t.Run(fmt.Sprintf("%s->%s", from, to), func(t *testing.T) {
				t.Parallel()
				s := setup(t)
				src := place(t, s, from, "w1", "j1", from, nil)
				before := tree(t, s.Root)
				j, err := s.Move("j1", from, to, "farroctl", "operator", nil)
				// In-progress jobs are moved by their holder (Commit) or
				// recovery; into in-progress only by Claim.
				viaMove := isLegal(from, to) && from != job.InProgress && to != job.InProgress
				if !viaMove {
					if err == nil {
						t.Fatalf("Move %s -> %s succeeded", from, to)
					}
					if !isLegal(from, to) && !errors.Is(err, job.ErrIllegal) {
						t.Fatalf("Move %s -> %s = %v, want ErrIllegal", from, to, err)
					}
					sameTree(t, before, tree(t, s.Root))
					return
				}
				if err != nil {
					t.Fatalf("Move %s -> %s = %v", from, to, err)
				}
				if j.Status != to {
					t.Fatalf("returned status %s, want %s", j.Status, to)
				}
				dst := s.JobDir(to, "", "j1")
				if got := readJob(t, dst); got.Status != to || got.Reason != "operator" {
					t.Fatalf("on disk: status %s reason %q", got.Status, got.Reason)
				}
				mustNotExist(t, src)
				mustNotExist(t, s.LockPath("j1"))
				evs := events(t, dst)
				if last := evs[len(evs)-1]; last.From != from || last.To != to || last.Actor != "farroctl" {
					t.Fatalf("last event = %+v", last)
				}
			})
		}
	}
}

func TestMoveIntoInProgressRefused(t *testing.T) {
	t.Parallel()
	s := setup(t)
	place(t, s, job.Queued, "", "j1", job.Queued, func(j *job.Job) { j.Agent = "w9" })
	before := tree(t, s.Root)
	if _, err := s.Move("j1", job.Queued, job.InProgress, "farroctl", "", nil); err == nil {
		t.Fatal("Move queued -> in-progress succeeded; only Claim may do that")
	}
	sameTree(t, before, tree(t, s.Root))
	if _, err := s.Claim("j1", holder); err != nil {
		t.Fatalf("job not claimable afterwards: %v", err)
	}
	mustExist(t, filepath.Join(s.JobDir(job.InProgress, "w1", "j1"), job.JobFile))
	if err := fsq.Unlock(s.LockPath("j1")); err != nil {
		t.Fatal(err)
	}
}
