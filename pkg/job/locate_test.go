package job_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// A real duplicate is confirmed under the job's lock (which is released
// afterwards); a missing job is ErrNotFound; one place is returned as is.
func TestLocateSettled(t *testing.T) {
	t.Parallel()
	s := setup(t)
	if _, err := s.Submit(job.SubmitRequest{ID: "dup", Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	locs, err := s.LocateSettled("dup", "test")
	if err != nil || len(locs) != 1 || locs[0].State != job.Queued {
		t.Fatalf("one place: %+v %v", locs, err)
	}
	if err := os.Mkdir(s.JobDir(job.Held, "", "dup"), 0o755); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	locs, err = s.LocateSettled("dup", "test")
	if err != nil || len(locs) != 2 {
		t.Fatalf("duplicate: %+v %v", locs, err)
	}
	if d := time.Since(began); d > job.SettleTimeout/2 {
		t.Errorf("a duplicate with a free lock took %s: not settled under the lock", d)
	}
	if _, err := os.Lstat(s.LockPath("dup")); !os.IsNotExist(err) {
		t.Fatalf("lock left behind: %v", err)
	}
	// Under a busy lock (a running job's agent holds it), a duplicate
	// that stays is reported after SettleTimeout.
	if err := fsq.TryLock(s.LockPath("dup"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	locs, err = s.LocateSettled("dup", "test")
	if err != nil || len(locs) != 2 || time.Since(began) < job.SettleTimeout {
		t.Fatalf("duplicate under a busy lock: %+v %v after %s", locs, err, time.Since(began))
	}
	if _, err := s.LocateSettled("missing", "test"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if _, err := s.LocateSettled("a/../b", "test"); err == nil || errors.Is(err, job.ErrNotFound) {
		t.Fatalf("unsafe id: %v", err)
	}
}
