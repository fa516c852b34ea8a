package spoolstore_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// The engine's door keeps pkg/job's errors and their messages, and adds
// the seam's words for the two it acts on: a busy lock is store.ErrBusy,
// a job gone from where it was seen is job.ErrNotFound. A job moved
// elsewhere is not looked for (Move's job.ErrState "it is ...").
func TestEngineErrors(t *testing.T) {
	t.Parallel()
	st := open(t, filepath.Join(t.TempDir(), "spool"))
	sp := st.Spool()
	id := submit(t, st, 1)[0]

	lock := sp.LockPath(id)
	if err := fsq.TryLock(lock, []byte(`{"pid":1}`)); err != nil {
		t.Fatal(err)
	}
	_, err := st.MoveListed(id, job.Queued, job.Held, "test", "hold", nil)
	_, want := sp.Move(id, job.Queued, job.Held, "test", "hold", nil)
	if !errors.Is(err, store.ErrBusy) || !errors.Is(err, fsq.ErrLocked) || err.Error() != want.Error() {
		t.Fatalf("MoveListed of a locked job: %v, want store.ErrBusy with pkg/job's %q", err, want)
	}
	if _, err := st.Reconcile(id, "test", "why"); !errors.Is(err, store.ErrBusy) {
		t.Fatalf("Reconcile of a locked job: %v, want store.ErrBusy", err)
	}
	if err := fsq.Unlock(lock); err != nil {
		t.Fatal(err)
	}

	// Seen in held/, but it is in incoming/: a lost race.
	_, err = st.MoveListed(id, job.Held, job.Queued, "test", "release", nil)
	_, want = sp.Move(id, job.Held, job.Queued, "test", "release", nil)
	if !errors.Is(err, job.ErrNotFound) || !errors.Is(err, fsq.ErrVanished) || errors.Is(err, job.ErrState) || err.Error() != want.Error() {
		t.Fatalf("MoveListed of a job gone: %v, want job.ErrNotFound with pkg/job's %q", err, want)
	}
	if _, err := st.ReadIn(job.Held, id); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("ReadIn where the job is not: %v, want job.ErrNotFound", err)
	}
	if j, err := st.ReadIn(job.Queued, id); err != nil || j.ID != id {
		t.Fatalf("ReadIn: %v, %v", j, err)
	}
	if at, err := st.ChangedAt(job.Queued, id); err != nil || time.Since(at) > time.Minute {
		t.Fatalf("ChangedAt: %v, %v", at, err)
	}
	if _, err := st.ReadIn(job.InProgress, id); err == nil {
		t.Fatal("ReadIn of in-progress/: no error")
	}
	if _, err := st.ReadIn(job.Queued, "../x"); err == nil {
		t.Fatal("ReadIn of a name that is no ID: no error")
	}
	if err := st.QuarantineCorrupt(job.Queued, id, "test", job.ErrCorrupt); !errors.Is(err, spoolstore.ErrReadable) {
		t.Fatalf("QuarantineCorrupt of a readable job: %v, want ErrReadable", err)
	}
	if err := st.QuarantineUnnamed(job.Queued, "../x", errors.New("bad")); err == nil || errors.Is(err, job.ErrCorrupt) {
		t.Fatalf("QuarantineUnnamed of a path: %v, want refused", err)
	}
}

// A cursor lists names only, in batches, and a lap ends.
func TestStateCursor(t *testing.T) {
	t.Parallel()
	st := open(t, filepath.Join(t.TempDir(), "spool"))
	ids := submit(t, st, 5)
	c := st.StateCursor(job.Queued)
	defer c.Close()
	seen := 0
	for {
		ents, end, err := c.Next(2)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents.Dirs) > 2 {
			t.Fatalf("a batch of %d names, want at most 2", len(ents.Dirs))
		}
		seen += len(ents.Dirs)
		if end {
			break
		}
	}
	all, err := st.StateNames(job.Queued)
	if err != nil || seen != len(ids) || len(all.Dirs) != len(ids) {
		t.Fatalf("cursor saw %d, listing %d (%v), want %d", seen, len(all.Dirs), err, len(ids))
	}
}
