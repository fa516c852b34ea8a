package spoolstore_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/internal/proc/proctest"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// What only a spool can show: busy locks, hostile files, dead lock
// owners, executions that outlive their holder, jobs without a lock.

var h1 = job.Holder{Actor: "test/w1", Agent: "w1"}

func open(t *testing.T, root string, opts ...spoolstore.Option) *spoolstore.Store {
	t.Helper()
	st, err := spoolstore.Open(root, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func submit(t *testing.T, st store.Store, n int) []string {
	t.Helper()
	var reqs []job.SubmitRequest
	for range n {
		reqs = append(reqs, job.SubmitRequest{Kind: "exec", Prompt: []byte(`{}`), Actor: "test"})
	}
	jobs, errs := st.Submit(t.Context(), reqs)
	var ids []string
	for i := range jobs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		ids = append(ids, jobs[i].ID)
	}
	return ids
}

func claimOne(t *testing.T, st store.Store) store.Claim {
	t.Helper()
	cs, err := st.Claim(t.Context(), h1, store.ClaimOptions{Max: 1})
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim: %d claims, %v", len(cs), err)
	}
	return cs[0]
}

func status(t *testing.T, st store.Store, id string) job.State {
	t.Helper()
	j, err := st.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j.Status
}

// A job whose lock someone holds is busy: store.ErrBusy and
// fsq.ErrLocked both, nothing changed.
func TestBusy(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	ids := submit(t, st, 1)
	lock := st.Spool().LockPath(ids[0])
	if err := fsq.TryLock(lock, []byte(`{"pid":1}`)); err != nil {
		t.Fatal(err)
	}
	_, err := st.Move(t.Context(), ids[0], job.Queued, job.Held, "test", "x", nil)
	if !errors.Is(err, store.ErrBusy) || !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("Move of a locked job: %v, want store.ErrBusy and fsq.ErrLocked", err)
	}
	if cs, err := st.Claim(t.Context(), h1, store.ClaimOptions{Max: 5}); err != nil || len(cs) != 0 {
		t.Fatalf("Claim of a locked job: %d claims, %v", len(cs), err)
	}
	if s := status(t, st, ids[0]); s != job.Queued {
		t.Fatalf("status %s", s)
	}
	if err := fsq.Unlock(lock); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Move(t.Context(), ids[0], job.Queued, job.Held, "test", "x", nil); err != nil {
		t.Fatal(err)
	}
}

// Unreadable jobs (garbage, a FIFO, an oversized job.json) and entries
// planted in the state directories are left out of List, never block it,
// and are passed over (quarantined) by Claim.
func TestHostileFiles(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	ids := submit(t, st, 4)
	sp := st.Spool()
	in := func(id string) string { return filepath.Join(sp.JobDir(job.Queued, "", id), job.JobFile) }
	if err := os.WriteFile(in(ids[0]), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(in(ids[1])); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(in(ids[1]), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in(ids[2]), make([]byte, job.MaxJobFileSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	// A symlink to a real job and a plain file, both named like jobs.
	if err := os.Symlink(sp.JobDir(job.Queued, "", ids[3]), sp.JobDir(job.Queued, "", "planted-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sp.JobDir(job.Queued, "", "planted-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	done := make(chan []string, 1)
	go func() {
		var got []string
		err := st.List(t.Context(), store.Filter{}, func(j *job.Job) error { got = append(got, j.ID); return nil })
		if err != nil {
			t.Errorf("List: %v", err)
		}
		done <- got
	}()
	select {
	case got := <-done:
		if !slices.Equal(got, ids[3:]) {
			t.Fatalf("List: %v, want only %v", got, ids[3:])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("List blocked on a hostile file")
	}
	n, err := st.Counts(t.Context())
	if err != nil || n[job.Queued] != 4 {
		t.Fatalf("Counts: %v, %v (the four job directories, readable or not)", n, err)
	}
	cs, err := st.Claim(t.Context(), h1, store.ClaimOptions{Max: 10})
	if err != nil || len(cs) != 1 || cs[0].Job().ID != ids[3] {
		t.Fatalf("Claim: %d claims, %v", len(cs), err)
	}
	if n, _ := st.Counts(t.Context()); n[job.Queued] != 0 {
		t.Fatalf("unreadable jobs left in incoming/ after a claim: %v", n)
	}
	q, err := os.ReadDir(sp.Path(job.CorruptDir))
	if err != nil || len(q) != 6 { // three jobs, each with its note
		t.Fatalf("corrupt/: %d entries, %v", len(q), err)
	}
}

// deadOwner rewrites the owner file of job id's lock as a process that
// has exited.
func deadOwner(t *testing.T, sp *job.Spool, id string) {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	self := proc.Self()
	_ = cmd.Wait()
	o := job.Owner{Identity: proc.Identity{Hostname: self.Hostname, MachineID: self.MachineID, BootID: self.BootID, PID: pid, StartTime: 1},
		Actor: "test/dead", Agent: h1.Agent, Token: "dead"}
	b, _ := json.Marshal(o)
	if err := os.WriteFile(filepath.Join(sp.LockPath(id), fsq.OwnerFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A claim whose owner process is dead is recovered without SilentAfter;
// a live one is not.
func TestRecoverDeadOwner(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	ids := submit(t, st, 2)
	dead, live := claimOne(t, st), claimOne(t, st)
	deadOwner(t, st.Spool(), dead.Job().ID)
	outs, err := st.Recover(t.Context(), store.RecoverOptions{Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || outs[0].ID != dead.Job().ID || outs[0].To != job.Stale {
		t.Fatalf("Recover: %+v, want %s to stale only", outs, dead.Job().ID)
	}
	j, _ := st.Get(t.Context(), dead.Job().ID)
	if j.Status != job.Stale || !strings.Contains(j.Reason, "pid") {
		t.Fatalf("dead owner's job: %s (%q)", j.Status, j.Reason)
	}
	if s := status(t, st, live.Job().ID); s != job.InProgress {
		t.Fatalf("live claim: %s", s)
	}
	_ = ids
}

// A silent holder's handler is killed before its job is taken away, and
// the job leaves in-progress only once the handler is gone.
func TestRecoverStopsExecutions(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	id := submit(t, st, 1)[0]
	c := claimOne(t, st)
	hid, exited := proctest.Handler(t)
	if err := c.RecordHandler(t.Context(), hid); err != nil {
		t.Fatal(err)
	}
	opts := store.RecoverOptions{Actor: "test", SilentAfter: time.Nanosecond}
	if _, err := st.Recover(t.Context(), opts); err == nil || !strings.Contains(err.Error(), "still runs") {
		t.Fatalf("Recover with a handler running: %v, want it to wait", err)
	}
	if s := status(t, st, id); s != job.InProgress {
		t.Fatalf("job left in-progress while its handler ran: %s", s)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler was not killed")
	}
	outs, err := st.Recover(t.Context(), opts)
	if err != nil || len(outs) != 1 || outs[0].To != job.Stale {
		t.Fatalf("Recover once the handler is gone: %+v, %v", outs, err)
	}
	if !store.Lost(c.Commit(t.Context(), job.Succeeded, "late", nil)) {
		t.Fatal("the silent claim still commits")
	}
}

// An in-progress job without a lock is reconciled once older than the
// lock grace.
func TestRecoverNoLock(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	patient := open(t, root) // DefaultLockGrace
	id := submit(t, patient, 1)[0]
	claimOne(t, patient)
	if err := fsq.Unlock(patient.Spool().LockPath(id)); err != nil {
		t.Fatal(err)
	}
	if outs, err := patient.Recover(t.Context(), store.RecoverOptions{Actor: "test"}); err != nil || len(outs) != 0 {
		t.Fatalf("Recover within the lock grace: %+v, %v", outs, err)
	}
	quick := open(t, root, spoolstore.WithLockGrace(time.Nanosecond))
	outs, err := quick.Recover(t.Context(), store.RecoverOptions{Actor: "test"})
	if err != nil || len(outs) != 1 || outs[0].ID != id || outs[0].To != job.Stale {
		t.Fatalf("Recover: %+v, %v", outs, err)
	}
	if s := status(t, quick, id); s != job.Stale {
		t.Fatalf("status %s", s)
	}
}
