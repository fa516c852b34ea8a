package job_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	dir := c.Envelope().Runtime.Dir
	h0 := *readJob(t, dir).LastHeartbeat
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := c.Heartbeat(); err != nil {
			t.Fatal(err)
		}
		j := readJob(t, dir)
		if j.LastHeartbeat.After(h0) {
			if j.Status != job.InProgress || j.Attempts != 1 || !j.UpdatedAt.Equal(*j.LastHeartbeat) {
				t.Fatalf("heartbeat changed more than the heartbeat: %+v", j)
			}
			if !c.Envelope().Lifecycle.LastHeartbeat.Equal(*j.LastHeartbeat) {
				t.Fatal("in-memory last_heartbeat not refreshed")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("last_heartbeat never advanced past %v", h0)
		}
	}
	if n := len(events(t, dir)); n != 2 {
		t.Fatalf("heartbeat appended events: %d lines", n)
	}
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
}

func TestHeartbeatVanished(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	dir := c.Envelope().Runtime.Dir
	// watchdogd declared us silent and moved the job away.
	if err := fsq.Rename(dir, s.JobDir(job.Stale, "", "j1")); err != nil {
		t.Fatal(err)
	}
	staleBefore := tree(t, s.JobDir(job.Stale, "", "j1"))
	if err := c.Heartbeat(); !job.Superseded(err) {
		t.Fatalf("heartbeat = %v, want ErrVanished", err)
	}
	mustNotExist(t, dir)
	sameTree(t, staleBefore, tree(t, s.JobDir(job.Stale, "", "j1")))
}

func TestCommitEachLegalTarget(t *testing.T) {
	t.Parallel()
	for _, to := range []job.State{job.Succeeded, job.Failed, job.Stale, job.Held, job.Killed, job.Queued} {
		t.Run(string(to), func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			c := claim(t, s, "j1")
			claimed := c.Envelope().Lifecycle
			src := c.Envelope().Runtime.Dir
			code := 3
			err := c.Commit(to, "because "+string(to), func(j *job.Job) { j.ExitCode, j.Error = &code, "tail" })
			if err != nil {
				t.Fatal(err)
			}
			dst := s.JobDir(to, "", "j1")
			if c.Envelope().Runtime.Dir != dst {
				t.Fatalf("runtime dir = %s, want %s", c.Envelope().Runtime.Dir, dst)
			}
			mustNotExist(t, src)
			mustNotExist(t, s.LockPath("j1"))
			j := readJob(t, dst)
			if j.Status != to || j.Reason != "because "+string(to) || j.Attempts != 1 ||
				j.CorrelationID != claimed.CorrelationID || j.ExitCode == nil || *j.ExitCode != 3 || j.Error != "tail" {
				t.Fatalf("job.json = %+v", j)
			}
			if to == job.Queued {
				if j.FinishedAt != nil {
					t.Fatalf("graceful release set finished_at %v", j.FinishedAt)
				}
			} else if j.FinishedAt == nil || j.FinishedAt.Before(*claimed.StartedAt) {
				t.Fatalf("finished_at = %v", j.FinishedAt)
			}
			if string(readRaw(t, filepath.Join(dst, job.PromptFile))) != testPrompt {
				t.Fatal("prompt.json changed")
			}
			evs := events(t, dst)
			want := []struct{ from, to job.State }{{"", job.Queued}, {job.Queued, job.InProgress}, {job.InProgress, to}}
			if len(evs) != len(want) {
				t.Fatalf("events = %+v", evs)
			}
			for i, w := range want {
				if evs[i].From != w.from || evs[i].To != w.to || evs[i].Actor == "" {
					t.Fatalf("event %d = %+v, want %s -> %s", i, evs[i], w.from, w.to)
				}
			}
			if last := evs[2]; last.Actor != "agentd/w1" || last.Reason != "because "+string(to) || last.Attempt != 1 {
				t.Fatalf("commit event = %+v", last)
			}
			if err := c.Commit(job.Killed, "", nil); err == nil {
				t.Fatal("a second commit succeeded")
			}
			if err := c.Heartbeat(); err != nil {
				t.Fatalf("heartbeat after commit = %v, want a no-op", err)
			}
			if got := readJob(t, dst); got.Status != to {
				t.Fatalf("status after second commit attempt: %s", got.Status)
			}
		})
	}
}

func TestCommitVanished(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	dir := c.Envelope().Runtime.Dir
	stale := s.JobDir(job.Stale, "", "j1")
	if err := fsq.Rename(dir, stale); err != nil {
		t.Fatal(err)
	}
	// The next owner's lock: recovery freed ours and someone took it.
	if err := fsq.Unlock(s.LockPath("j1")); err != nil {
		t.Fatal(err)
	}
	if err := fsq.TryLock(s.LockPath("j1"), []byte(`{"pid":1,"actor":"next"}`)); err != nil {
		t.Fatal(err)
	}
	before := tree(t, s.Root)
	if err := c.Commit(job.Succeeded, "", nil); !job.Superseded(err) {
		t.Fatalf("commit = %v, want ErrVanished", err)
	}
	sameTree(t, before, tree(t, s.Root)) // the lock is not ours: left alone
	mustExist(t, s.LockPath("j1"))
	mustNotExist(t, s.JobDir(job.Succeeded, "", "j1"))
}

func TestCommitConcurrentWithHeartbeat(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var hbErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := c.Heartbeat(); err != nil {
				hbErr = err
				return
			}
		}
	}()
	err := c.Commit(job.Succeeded, "done", nil)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if hbErr != nil {
		t.Fatalf("heartbeat racing the commit: %v", hbErr)
	}
	if j := readJob(t, s.JobDir(job.Succeeded, "", "j1")); j.Status != job.Succeeded {
		t.Fatalf("status %s", j.Status)
	}
	mustNotExist(t, s.JobDir(job.InProgress, "w1", "j1"))
}

func TestMovePaths(t *testing.T) {
	t.Parallel()
	s := setup(t)
	submit(t, s, "j1")

	// hold a queued job, release it, kill it.
	steps := []struct {
		from, to job.State
		reason   string
	}{
		{job.Queued, job.Held, "operator hold"},
		{job.Held, job.Queued, "released"},
		{job.Queued, job.Killed, "cancelled"},
	}
	for _, st := range steps {
		j, err := s.Move("j1", st.from, st.to, "farroctl", st.reason, nil)
		if err != nil {
			t.Fatalf("%s -> %s: %v", st.from, st.to, err)
		}
		dir := s.JobDir(st.to, "", "j1")
		if got := readJob(t, dir); got.Status != st.to || got.Reason != st.reason || got.Status != j.Status {
			t.Fatalf("%s -> %s: job.json %+v", st.from, st.to, got)
		}
		mustNotExist(t, s.JobDir(st.from, "", "j1"))
		mustNotExist(t, s.LockPath("j1"))
	}
	dir := s.JobDir(job.Killed, "", "j1")
	if j := readJob(t, dir); j.FinishedAt == nil {
		t.Fatal("killed job has no finished_at")
	}
	evs := events(t, dir)
	if len(evs) != 4 || evs[3].From != job.Queued || evs[3].To != job.Killed || evs[3].Reason != "cancelled" || evs[3].Actor != "farroctl" {
		t.Fatalf("events = %+v", evs)
	}
}

func TestMoveRequeueAndDefer(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	if err := c.Commit(job.Failed, "exit 1", nil); err != nil {
		t.Fatal(err)
	}
	nb := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	j, err := s.Move("j1", job.Failed, job.Deferred, "managerd", "retry 1", func(j *job.Job) error {
		if j.Status != job.Deferred {
			t.Errorf("mutate sees status %s", j.Status)
		}
		j.NotBefore = &nb
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := readJob(t, s.JobDir(job.Deferred, "", "j1")); got.NotBefore == nil || !got.NotBefore.Equal(nb) || got.Attempts != 1 || j.Attempts != 1 {
		t.Fatalf("deferred job.json = %+v", got)
	}
	if _, err := s.Move("j1", job.Deferred, job.Queued, "managerd", "due", nil); err != nil {
		t.Fatal(err)
	}
	if got := readJob(t, s.JobDir(job.Queued, "", "j1")); got.NotBefore != nil || got.Status != job.Queued {
		t.Fatalf("promoted job.json = %+v", got)
	}

	// requeue of a stale job
	c = mustClaim(t, s, "j1")
	if err := c.Commit(job.Stale, "owner died", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Move("j1", job.Stale, job.Queued, "farroctl", "requeued", nil); err != nil {
		t.Fatal(err)
	}
	if got := readJob(t, s.JobDir(job.Queued, "", "j1")); got.Attempts != 2 || got.Reason != "requeued" {
		t.Fatalf("requeued job.json = %+v", got)
	}
}

func mustClaim(t *testing.T, s *job.Spool, id string) *job.Claimed {
	t.Helper()
	c, err := s.Claim(id, holder)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMoveLocked(t *testing.T) {
	t.Parallel()
	s := setup(t)
	submit(t, s, "j1")
	if err := fsq.TryLock(s.LockPath("j1"), []byte(`{"pid":1,"actor":"agentd/w1"}`)); err != nil {
		t.Fatal(err)
	}
	before := tree(t, s.Root)
	if _, err := s.Move("j1", job.Queued, job.Held, "farroctl", "", nil); !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("Move with the lock held = %v, want ErrLocked", err)
	}
	sameTree(t, before, tree(t, s.Root)) // someone else's lock is not removed
}

func TestMoveStateMismatch(t *testing.T) {
	t.Parallel()
	s := setup(t)
	place(t, s, job.Held, "", "j1", job.Deferred, nil)
	before := tree(t, s.Root)
	if _, err := s.Move("j1", job.Held, job.Queued, "farroctl", "", nil); !errors.Is(err, job.ErrState) {
		t.Fatalf("Move = %v, want ErrState", err)
	}
	sameTree(t, before, tree(t, s.Root))
}

func TestMoveMissingVetoCorrupt(t *testing.T) {
	t.Parallel()
	s := setup(t)
	if _, err := s.Move("nope", job.Queued, job.Held, "farroctl", "", nil); !errors.Is(err, fsq.ErrVanished) {
		t.Fatalf("Move of a missing job = %v, want ErrVanished", err)
	}
	mustNotExist(t, s.LockPath("nope"))

	submit(t, s, "j1")
	before := tree(t, s.Root)
	veto := errors.New("not now")
	if _, err := s.Move("j1", job.Queued, job.Held, "farroctl", "", func(*job.Job) error { return veto }); !errors.Is(err, veto) {
		t.Fatalf("vetoed Move = %v", err)
	}
	sameTree(t, before, tree(t, s.Root))

	writeRaw(t, filepath.Join(s.JobDir(job.Queued, "", "j1"), job.JobFile), []byte("{garbage"))
	if _, err := s.Move("j1", job.Queued, job.Held, "farroctl", "", nil); !errors.Is(err, job.ErrCorrupt) {
		t.Fatalf("Move of a corrupt job = %v, want ErrCorrupt", err)
	}
	quarantined(t, s, "j1")
	mustNotExist(t, s.JobDir(job.Held, "", "j1"))
}

func TestMoveSchemaMismatch(t *testing.T) {
	t.Parallel()
	s := setup(t)
	place(t, s, job.Held, "", "j1", job.Held, func(j *job.Job) { j.SchemaVersion = "9.9.9" })
	before := tree(t, s.Root)
	if _, err := s.Move("j1", job.Held, job.Queued, "farroctl", "", nil); !errors.Is(err, job.ErrSchema) {
		t.Fatalf("Move = %v, want ErrSchema", err)
	}
	sameTree(t, before, tree(t, s.Root))
	if _, err := os.Stat(s.JobDir(job.Held, "", "j1")); err != nil {
		t.Fatal(err)
	}
}
