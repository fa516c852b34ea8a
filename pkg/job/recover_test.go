package job_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// recoverDead plants a dead owner's lock on id and recovers it.
func recoverDead(t *testing.T, s *job.Spool, id string) job.Outcome {
	t.Helper()
	deadOwner(t, s, id)
	out, err := s.RecoverLock(id, "watchdogd", "owner pid gone")
	if err != nil {
		t.Fatalf("RecoverLock: %v", err)
	}
	mustNotExist(t, s.LockPath(id))
	if out.ID != id {
		t.Fatalf("outcome id %q", out.ID)
	}
	return out
}

// only checks that id exists exactly once, at dir.
func only(t *testing.T, s *job.Spool, id, dir string) {
	t.Helper()
	locs, err := s.Locate(id)
	if err != nil || len(locs) != 1 || locs[0].Dir != dir {
		t.Fatalf("Locate = %+v, %v; want only %s", locs, err, dir)
	}
}

func TestRecoverClaimDiedAfterMkdir(t *testing.T) {
	t.Parallel()
	s := setup(t)
	submit(t, s, "j1")
	dir := s.JobDir(job.Queued, "", "j1")
	jobBefore := tree(t, dir)
	out := recoverDead(t, s, "j1")
	if out.Action != job.ActionNone {
		t.Fatalf("outcome %+v", out)
	}
	sameTree(t, jobBefore, tree(t, dir))
	only(t, s, "j1", dir)
	if readJob(t, dir).Status != job.Queued {
		t.Fatal("not queued")
	}
}

func TestRecoverClaimDiedAfterRename(t *testing.T) {
	t.Parallel()
	s := setup(t)
	place(t, s, job.InProgress, "w1", "j1", job.Queued, func(j *job.Job) { j.Attempts = 2 })
	out := recoverDead(t, s, "j1")
	if out.Action != job.ActionRolledBack || out.To != job.Queued {
		t.Fatalf("outcome %+v", out)
	}
	dir := s.JobDir(job.Queued, "", "j1")
	only(t, s, "j1", dir)
	if j := readJob(t, dir); j.Status != job.Queued || j.Attempts != 2 {
		t.Fatalf("job.json = %+v; want queued with attempts unchanged (2)", j)
	}
	dirEmpty(t, s.StateDir(job.Stale))
}

func TestRecoverDeadRunningJobGoesStale(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	// The agent dies: its lock (ours, in this test) is left behind;
	// replace it with a dead owner's.
	if err := fsq.Unlock(s.LockPath("j1")); err != nil {
		t.Fatal(err)
	}
	out := recoverDead(t, s, "j1")
	if out.Action != job.ActionStale || out.From != job.InProgress || out.To != job.Stale {
		t.Fatalf("outcome %+v", out)
	}
	dir := s.JobDir(job.Stale, "", "j1")
	only(t, s, "j1", dir)
	j := readJob(t, dir)
	if j.Status != job.Stale || j.Reason != "owner pid gone" || j.Attempts != 1 || j.FinishedAt == nil {
		t.Fatalf("job.json = %+v", j)
	}
	evs := events(t, dir)
	if last := evs[len(evs)-1]; last.From != job.InProgress || last.To != job.Stale || last.Actor != "watchdogd" || last.Reason != "owner pid gone" {
		t.Fatalf("last event = %+v", last)
	}
	// The silent owner wakes up: its job is gone, it stops.
	if err := c.Heartbeat(); !job.Superseded(err) {
		t.Fatalf("heartbeat of the woken owner = %v, want ErrVanished", err)
	}
	if err := c.Commit(job.Succeeded, "", nil); !job.Superseded(err) {
		t.Fatalf("commit of the woken owner = %v, want ErrVanished", err)
	}
	only(t, s, "j1", dir)
}

// TestRecoverCommitDiedBeforeRename: the commit wrote job.json with the
// new status and died before the rename: recovery finishes the commit
// (a succeeded job is completed, not re-run).
func TestRecoverCommitDiedBeforeRename(t *testing.T) {
	t.Parallel()
	for _, st := range []job.State{job.Succeeded, job.Failed, job.Killed, job.Held, job.Stale} {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			place(t, s, job.InProgress, "w1", "j1", st, func(j *job.Job) { j.Reason = "done" })
			out := recoverDead(t, s, "j1")
			if out.Action != job.ActionRolledForward || out.To != st {
				t.Fatalf("outcome %+v", out)
			}
			dir := s.JobDir(st, "", "j1")
			only(t, s, "j1", dir)
			if j := readJob(t, dir); j.Status != st || j.Reason != "done" || j.Attempts != 1 {
				t.Fatalf("job.json = %+v", j)
			}
			dirEmpty(t, s.AgentDir("w1"))
		})
	}
}

func TestRecoverLeftoverLockOnFinishedJob(t *testing.T) {
	t.Parallel()
	for _, st := range []job.State{job.Succeeded, job.Killed, job.Failed, job.Held, job.Deferred, job.Stale} {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			dir := place(t, s, st, "", "j1", st, nil)
			before := tree(t, dir)
			if out := recoverDead(t, s, "j1"); out.Action != job.ActionNone {
				t.Fatalf("outcome %+v", out)
			}
			sameTree(t, before, tree(t, dir))
			only(t, s, "j1", dir)
		})
	}
}

// TestRecoverHalfDoneMoves: a mover wrote the new status and died before
// the rename; the status names where it was going.
func TestRecoverHalfDoneMoves(t *testing.T) {
	t.Parallel()
	cases := []struct{ at, status job.State }{
		{job.Deferred, job.Queued}, // managerd died mid-promote
		{job.Queued, job.Held},     // farroctl hold died
		{job.Queued, job.Killed},   // farroctl cancel died
		{job.Failed, job.Deferred}, // managerd retry died
		{job.Stale, job.Queued},    // managerd requeue died
		{job.Held, job.Queued},     // farroctl release died
	}
	for _, c := range cases {
		t.Run(string(c.at)+"->"+string(c.status), func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			place(t, s, c.at, "", "j1", c.status, nil)
			out := recoverDead(t, s, "j1")
			if out.Action != job.ActionRolledForward || out.From != c.at || out.To != c.status {
				t.Fatalf("outcome %+v", out)
			}
			dir := s.JobDir(c.status, "", "j1")
			only(t, s, "j1", dir)
			if j := readJob(t, dir); j.Status != c.status {
				t.Fatalf("status %s", j.Status)
			}
		})
	}
}

func TestRecoverLostClaimRename(t *testing.T) {
	t.Parallel()
	s := setup(t)
	// Power cut: the claim's status write survived, its rename did not.
	place(t, s, job.Queued, "w1", "j1", job.InProgress, nil)
	out := recoverDead(t, s, "j1")
	if out.Action != job.ActionRolledBack || out.To != job.Queued {
		t.Fatalf("outcome %+v", out)
	}
	dir := s.JobDir(job.Queued, "", "j1")
	only(t, s, "j1", dir)
	j := readJob(t, dir)
	if j.Status != job.Queued || j.Attempts != 1 || !strings.Contains(j.Reason, "claim rolled back") {
		t.Fatalf("job.json = %+v", j)
	}
	evs := events(t, dir)
	if last := evs[len(evs)-1]; last.From != job.InProgress || last.To != job.Queued || last.Actor != "watchdogd" {
		t.Fatalf("last event = %+v", last)
	}
}

func TestRecoverStaleRenameWithoutStatus(t *testing.T) {
	t.Parallel()
	s := setup(t)
	// A recovery died between its rename to stale/ and its status write.
	place(t, s, job.Stale, "w1", "j1", job.InProgress, nil)
	out := recoverDead(t, s, "j1")
	if out.Action != job.ActionStale {
		t.Fatalf("outcome %+v", out)
	}
	if j := readJob(t, s.JobDir(job.Stale, "", "j1")); j.Status != job.Stale {
		t.Fatalf("status %s", j.Status)
	}
}

func TestRecoverLockWithoutJob(t *testing.T) {
	t.Parallel()
	s := setup(t)
	before := tree(t, s.Root)
	out := recoverDead(t, s, "ghost")
	if out.Action != job.ActionNone || out.Detail == "" {
		t.Fatalf("outcome %+v", out)
	}
	sameTree(t, before, tree(t, s.Root))
}

func TestRecoverDuplicate(t *testing.T) {
	t.Parallel()
	pairs := [][2]job.State{{job.Queued, job.Succeeded}, {job.InProgress, job.Queued}, {job.Deferred, job.Held}}
	for _, p := range pairs {
		t.Run(string(p[0])+"+"+string(p[1]), func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			place(t, s, p[0], "w1", "j1", p[0], nil)
			place(t, s, p[1], "w1", "j1", p[1], nil)

			// Via RecoverLock: the dead owner's lock stays for fsck.
			deadOwner(t, s, "j1")
			before := tree(t, s.Root)
			_, err := s.RecoverLock("j1", "watchdogd", "owner pid gone")
			if !errors.Is(err, job.ErrDuplicate) || !strings.Contains(err.Error(), "2 places") {
				t.Fatalf("RecoverLock = %v, want ErrDuplicate naming 2 places", err)
			}
			sameTree(t, before, tree(t, s.Root))

			// Via Reconcile: nothing moved, and its own lock released.
			if err := fsq.Unlock(s.LockPath("j1")); err != nil {
				t.Fatal(err)
			}
			before = tree(t, s.Root)
			if _, err := s.Reconcile("j1", "watchdogd", "fsck"); !errors.Is(err, job.ErrDuplicate) {
				t.Fatalf("Reconcile = %v, want ErrDuplicate", err)
			}
			sameTree(t, before, tree(t, s.Root))
		})
	}
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	s := setup(t)
	// A running job whose lock was lost (power cut) is recovered.
	place(t, s, job.InProgress, "w1", "j1", job.InProgress, nil)
	out, err := s.Reconcile("j1", "watchdogd", "no lock")
	if err != nil || out.Action != job.ActionStale {
		t.Fatalf("Reconcile = %+v, %v", out, err)
	}
	only(t, s, "j1", s.JobDir(job.Stale, "", "j1"))
	mustNotExist(t, s.LockPath("j1"))

	// A held lock means someone owns the job: not ours to fix.
	c := claim(t, s, "j2")
	before := tree(t, s.Root)
	if _, err := s.Reconcile("j2", "watchdogd", "check"); !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("Reconcile of a held job = %v, want ErrLocked", err)
	}
	sameTree(t, before, tree(t, s.Root))
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}

	// A consistent job is left alone.
	dir := s.JobDir(job.Succeeded, "", "j2")
	before = tree(t, dir)
	if out, err := s.Reconcile("j2", "watchdogd", "check"); err != nil || out.Action != job.ActionNone {
		t.Fatalf("Reconcile of a consistent job = %+v, %v", out, err)
	}
	sameTree(t, before, tree(t, dir))
	mustNotExist(t, s.LockPath("j2"))
}

func TestRecoverCorruptQuarantines(t *testing.T) {
	t.Parallel()
	s := setup(t)
	dir := place(t, s, job.Queued, "", "j1", job.Queued, nil)
	writeRaw(t, filepath.Join(dir, job.JobFile), []byte(`{"schema_version":"1.0.0","id":"j1"`))
	out := recoverDead(t, s, "j1")
	if out.Action != "quarantined" || out.Detail == "" {
		t.Fatalf("outcome %+v", out)
	}
	quarantined(t, s, "j1")
}

func TestRecoverSchemaMismatchLeavesJob(t *testing.T) {
	t.Parallel()
	s := setup(t)
	place(t, s, job.InProgress, "w1", "j1", job.InProgress, func(j *job.Job) { j.SchemaVersion = "9.9.9" })
	deadOwner(t, s, "j1")
	_, err := s.RecoverLock("j1", "watchdogd", "owner pid gone")
	if !errors.Is(err, job.ErrSchema) {
		t.Fatalf("RecoverLock = %v, want ErrSchema", err)
	}
	// The job exists exactly once and is not quarantined.
	if locs, err := s.Locate("j1"); err != nil || len(locs) != 1 {
		t.Fatalf("Locate = %+v, %v", locs, err)
	}
	dirEmpty(t, s.Path(job.CorruptDir))
	if _, err := os.Stat(s.LockPath("j1")); err != nil {
		t.Fatalf("lock removed despite the failed recovery: %v", err)
	}
}

// Recovery's repairs follow the legal-transitions map: a terminal status
// found in a non-terminal directory is rolled forward to its own
// directory (it never runs again), and a status that no legal transition
// links with its directory is quarantined, never rewritten.
func TestRecoveryRepairsOnlyLegally(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dir, status job.State
		want        job.State // where the job must end; "" = corrupt/
	}{
		{job.Queued, job.Succeeded, job.Succeeded},
		{job.Held, job.Succeeded, job.Succeeded},
		{job.Deferred, job.Succeeded, job.Succeeded},
		{job.Failed, job.Succeeded, job.Succeeded},
		{job.Held, job.Killed, job.Killed},
		{job.Deferred, job.Stale, job.Deferred}, // stale -> deferred is legal
		{job.Deferred, job.Held, job.Held},      // deferred -> held: rolled forward
		{job.Failed, job.Held, ""},              // failed -> held is not legal, nor back
	} {
		t.Run(string(tc.status)+"-in-"+string(tc.dir), func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			place(t, s, tc.dir, "", "j1", tc.status, nil)
			if _, err := s.Reconcile("j1", "watchdogd", "startup"); err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if _, err := s.Locate("j1"); !errors.Is(err, job.ErrNotFound) {
					t.Fatalf("not quarantined: %v", err)
				}
				return
			}
			dir := s.JobDir(tc.want, "", "j1")
			only(t, s, "j1", dir)
			if j := readJob(t, dir); j.Status != tc.want {
				t.Fatalf("status %s in %s/", j.Status, tc.want)
			}
		})
	}
}
