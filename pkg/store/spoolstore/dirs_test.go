package spoolstore_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// TestSubmitBatchTwoBarriers: a batch costs two barriers (syncfs) however
// many jobs it holds, as job.Spool.SubmitMany.
func TestSubmitBatchTwoBarriers(t *testing.T) {
	t.Parallel()
	var syncs atomic.Int64
	st := open(t, t.TempDir(), spoolstore.WithSpoolOptions(job.WithBarrierSync(func(int) error {
		syncs.Add(1)
		return nil
	})))
	for _, n := range []int{1, 64} {
		before := syncs.Load()
		ids := submit(t, st, n)
		if len(ids) != n {
			t.Fatalf("%d jobs submitted, want %d", len(ids), n)
		}
		if got := syncs.Load() - before; got != 2 {
			t.Errorf("a batch of %d: %d barriers, want 2", n, got)
		}
	}
}

// TestGetDir: the job and where it is, the hint looked at first and a
// wrong hint corrected; an unreadable job.json still says where the job
// is.
func TestGetDir(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	st := open(t, root)
	ctx := t.Context()
	id := submit(t, st, 1)[0]
	for _, hint := range []job.State{"", job.Succeeded, job.Queued, job.InProgress} {
		j, loc, err := st.GetDir(ctx, id, hint)
		if err != nil || j.ID != id || loc.State != job.Queued {
			t.Fatalf("hint %q: %v %+v %v, want the queued job", hint, j, loc, err)
		}
		if _, err := os.Stat(filepath.Join(loc.Dir, "job.json")); err != nil {
			t.Errorf("hint %q: no job.json in %s: %v", hint, loc.Dir, err)
		}
	}
	cl := claimOne(t, st)
	if err := os.WriteFile(filepath.Join(cl.Dir(), "result.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cl.Commit(ctx, job.Succeeded, "done", nil); err != nil {
		t.Fatal(err)
	}
	j, loc, err := st.GetDir(ctx, id, job.Succeeded)
	if err != nil || j.Status != job.Succeeded || loc.State != job.Succeeded {
		t.Fatalf("after commit: %v %+v %v", j, loc, err)
	}
	if _, err := os.Stat(filepath.Join(loc.Dir, "result.json")); err != nil {
		t.Errorf("the handler's artifact is not in the directory GetDir gives: %v", err)
	}
	if err := os.WriteFile(filepath.Join(loc.Dir, "job.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, hint := range []job.State{job.Succeeded, ""} {
		if j, loc2, err := st.GetDir(ctx, id, hint); err == nil || j != nil || loc2.State != job.Succeeded || loc2.Dir != loc.Dir {
			t.Errorf("hint %q, unreadable job.json: %v %+v %v, want an error and where it is", hint, j, loc2, err)
		}
	}
	if _, loc, err := st.GetDir(ctx, "nosuchjob", job.Succeeded); !errors.Is(err, job.ErrNotFound) || loc != (job.Location{}) {
		t.Errorf("a missing job: %+v %v, want job.ErrNotFound and no location", loc, err)
	}
	if _, _, err := st.GetDir(ctx, "../x", job.Succeeded); err == nil {
		t.Error("GetDir accepted an ID that is no job's")
	}
}

// TestWatchFinished: a Rescan first, then a wake-up for each job that
// reaches succeeded or killed; stop closes the channel.
func TestWatchFinished(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	ctx := t.Context()
	wake, stop := st.WatchFinished(ctx, store.WatchOptions{Rescan: time.Hour})
	defer stop()
	next := func() store.Finished {
		t.Helper()
		select {
		case f, ok := <-wake:
			if !ok {
				t.Fatal("channel closed")
			}
			return f
		case <-time.After(10 * time.Second):
			t.Fatal("no wake-up in 10s")
		}
		return store.Finished{}
	}
	if f := next(); !f.Rescan {
		t.Fatalf("first wake-up %+v, want a Rescan", f)
	}
	ids := submit(t, st, 2)
	for _, want := range []job.State{job.Succeeded, job.Killed} {
		cl := claimOne(t, st)
		if err := cl.Commit(ctx, want, "test", nil); err != nil {
			t.Fatal(err)
		}
		f := next()
		if f.Rescan || f.ID != cl.Job().ID || f.State != want {
			t.Errorf("wake-up %+v, want %s %s", f, cl.Job().ID, want)
		}
	}
	if len(ids) != 2 {
		t.Fatal(ids)
	}
	stop()
	for range wake { // drained, then closed
	}
}
