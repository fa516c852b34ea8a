package spoolstore_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// The recovery door reads a claim's lock and running job where the
// watchdog did, and keeps the engine's errors: a recovery that finds
// another at work is store.ErrBusy, a job or lock gone job.ErrNotFound.
func TestRecoveryDoor(t *testing.T) {
	t.Parallel()
	st := open(t, filepath.Join(t.TempDir(), "spool"))
	sp := st.Spool()
	ids := submit(t, st, 2)
	id, other := ids[0], ids[1]
	if _, err := st.StatLock(id); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("StatLock of no lock: %v, want fs.ErrNotExist", err)
	}
	h := job.Holder{Actor: "agentd/t1", Agent: "t1"}
	if _, err := sp.Claim(id, h); err != nil {
		t.Fatal(err)
	}
	if fi, err := st.StatLock(id); err != nil || !fi.IsDir() {
		t.Fatalf("StatLock: %v, %v", fi, err)
	}
	lh := st.LockHolder(id)
	if lh.Err != nil || lh.Owner.Agent != h.Agent || !st.HolderUnchanged(id, lh) {
		t.Fatalf("LockHolder: %+v", lh)
	}
	if agents, err := st.StateNames(job.InProgress); err != nil || !slices.Contains(agents.Dirs, h.Agent) {
		t.Fatalf("StateNames(in-progress): %v, %v", agents, err)
	}
	if ents, err := st.AgentNames(h.Agent); err != nil || !slices.Equal(ents.Dirs, []string{id}) {
		t.Fatalf("AgentNames: %v, %v", ents, err)
	}
	if j, err := st.ReadRunning(h.Agent, id); err != nil || j.Status != job.InProgress {
		t.Fatalf("ReadRunning: %v, %v", j, err)
	}
	if _, err := st.ReadRunning(h.Agent, other); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("ReadRunning of a job not there: %v, want job.ErrNotFound", err)
	}
	if _, err := st.RunningChangedAt(h.Agent, id); err != nil {
		t.Fatalf("RunningChangedAt: %v", err)
	}
	if k := st.KindOf(id); k == "" {
		t.Fatal("KindOf: empty")
	}

	guard := filepath.Join(sp.LockPath(id), "recovering")
	if err := os.Mkdir(guard, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecoverJudgedLock(id, "test", "why", lh.Judged()); !errors.Is(err, store.ErrBusy) || !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("RecoverJudgedLock with another recovery at work: %v, want store.ErrBusy", err)
	}
	if err := os.Remove(guard); err != nil {
		t.Fatal(err)
	}
	if _, err := st.QuarantineLock(other, "test"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("QuarantineLock of no lock: %v, want job.ErrNotFound", err)
	}
}
