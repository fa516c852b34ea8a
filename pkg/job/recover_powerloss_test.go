package job_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// A recovery guard left by a recoverer that died inside its recovery (or
// survived a power cut) is taken over once older than
// RecoveryGuardTimeout; a younger one still means "another recovery is at
// work".
func TestAbandonedRecoveryGuardIsTakenOver(t *testing.T) {
	t.Parallel()
	s := setup(t)
	claim(t, s, "j")
	deadLock := func() {
		if err := os.RemoveAll(s.LockPath("j")); err != nil {
			t.Fatal(err)
		}
		deadOwner(t, s, "j")
	}
	deadLock()
	guard := filepath.Join(s.LockPath("j"), "recovering")
	if err := os.Mkdir(guard, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecoverLock("j", "watchdogd", "test"); !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("recovery under a fresh guard: %v, want ErrLocked", err)
	}
	old := time.Now().Add(-job.RecoveryGuardTimeout - time.Second)
	if err := os.Chtimes(guard, old, old); err != nil {
		t.Fatal(err)
	}
	out, err := s.RecoverLock("j", "watchdogd", "test")
	if err != nil || out.To != job.Stale {
		t.Fatalf("recovery under an abandoned guard: %+v, %v", out, err)
	}
	mustNotExist(t, s.LockPath("j"))
}

// A recovery that moved a half-done commit out of in-progress/ into
// stale/ and died before moving it on leaves stale/<id> with the commit's
// status: the next recovery finishes the move; the job is never re-run
// (nor un-held, nor its failure forgotten).
func TestRecoveryFinishesAHalfDoneRollForward(t *testing.T) {
	t.Parallel()
	for _, st := range []job.State{job.Succeeded, job.Held, job.Failed, job.Killed, job.Queued} {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			place(t, s, job.Stale, "", "j", st, nil)
			out, err := s.Reconcile("j", "watchdogd", "test")
			if err != nil {
				t.Fatal(err)
			}
			if out.To != st {
				t.Fatalf("outcome %+v, want the job moved on to %s", out, st)
			}
			if j := readJob(t, s.JobDir(st, "", "j")); j.Status != st {
				t.Fatalf("status %s in %s/", j.Status, st.Dir())
			}
			mustNotExist(t, s.JobDir(job.Stale, "", "j"))
		})
	}
}

// An owner file a power cut left empty is judged like a missing one.
func TestRecoverJudgedLockAcceptsAnEmptyOwnerFile(t *testing.T) {
	t.Parallel()
	s := setup(t)
	claim(t, s, "j")
	writeRaw(t, filepath.Join(s.LockPath("j"), fsq.OwnerFile), nil)
	out, err := s.RecoverJudgedLock("j", "watchdogd", "test", []byte{})
	if err != nil || out.To != job.Stale {
		t.Fatalf("recovery of a lock with an empty owner file: %+v, %v", out, err)
	}
}
