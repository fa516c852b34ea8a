package job_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// A lock judged dead must not be recovered once it has changed hands.
func TestRecoverJudgedLockRefusesChangedOwner(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	judged := []byte(`{"pid":999999,"token":"dead"}`)
	_, err := s.RecoverJudgedLock("j1", "watchdogd", "test", judged)
	if !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("RecoverJudgedLock of a lock that changed hands: %v, want ErrLocked", err)
	}
	if _, err := os.Stat(filepath.Join(s.LockPath("j1"), "recovering")); !os.IsNotExist(err) {
		t.Errorf("recovery guard left behind: %v", err)
	}
	// The live holder is unaffected and commits normally.
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatalf("holder's commit after a refused recovery: %v", err)
	}
	// With no owner file judged, a lock that has one is refused too.
	claim(t, s, "j2")
	if _, err := s.RecoverJudgedLock("j2", "watchdogd", "test", []byte{}); !errors.Is(err, fsq.ErrLocked) {
		t.Errorf("no-owner judgement on a lock with an owner: %v, want ErrLocked", err)
	}
}

// Two recoverers racing on one dead lock: one recovers, the other stands
// down, and the job ends up exactly once in stale/.
func TestRecoverJudgedLockExcludesConcurrentRecoverers(t *testing.T) {
	t.Parallel()
	for i := 0; i < 20; i++ {
		s := setup(t)
		claim(t, s, "j")
		raw, err := fsq.ReadOwner(s.LockPath("j"))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for k := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[k] = s.RecoverJudgedLock("j", "r", "test", raw)
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else if !errors.Is(err, fsq.ErrLocked) && !errors.Is(err, fsq.ErrVanished) {
				t.Errorf("unexpected recovery error: %v", err)
			}
		}
		if ok == 0 {
			t.Fatalf("round %d: no recoverer succeeded: %v", i, errs)
		}
		locs, err := s.Locate("j")
		if err != nil || len(locs) != 1 || locs[0].State != job.Stale {
			t.Fatalf("round %d: job at %v (%v), want once in stale/", i, locs, err)
		}
		if _, err := os.Lstat(s.LockPath("j")); !os.IsNotExist(err) {
			t.Fatalf("round %d: lock left: %v", i, err)
		}
	}
}

// A control request left in a job by an earlier attempt does not reach the
// next one: the claim removes it.
func TestClaimDropsLeftoverControlRequest(t *testing.T) {
	t.Parallel()
	s := setup(t)
	submit(t, s, "j")
	writeRaw(t, filepath.Join(s.JobDir(job.Queued, "", "j"), job.ControlFile), []byte(`{"action":"cancel","actor":"old"}`+"\n"))
	c, err := s.Claim("j", holder)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := job.ReadControl(c.Envelope().Runtime.Dir)
	if err != nil || ctl != nil {
		t.Errorf("control request survived the claim: %+v, %v", ctl, err)
	}
}
