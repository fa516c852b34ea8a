package job_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// finish runs job id once to to (succeeded, or failed then killed).
func finish(t *testing.T, s *job.Spool, id string, to job.State) {
	t.Helper()
	c := claim(t, s, id)
	switch to {
	case job.Succeeded:
		if err := c.Commit(job.Succeeded, "", nil); err != nil {
			t.Fatal(err)
		}
	case job.Killed:
		if err := c.Commit(job.Failed, "boom", func(j *job.Job) { j.Error = "boom"; code := 3; j.ExitCode = &code }); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Move(id, job.Failed, job.Killed, "managerd", "failed 1 times: out of attempts", nil); err != nil {
			t.Fatal(err)
		}
	}
}

// A retried killed job is queued again with its ID, kind, priority,
// prompt and history, attempts 0, reason "retried by operator", no error;
// an event records the retry.
func TestRetryPutsAKilledJobBackInIncoming(t *testing.T) {
	t.Parallel()
	s := setup(t)
	finish(t, s, "r1", job.Killed)
	dir := s.JobDir(job.Killed, "", "r1")
	before := events(t, dir)
	writeRaw(t, filepath.Join(dir, job.ControlFile), []byte(`{"action":"hold"}`)) // travelled with it
	j, err := s.Retry("r1", "farroctl", false)
	if err != nil {
		t.Fatal(err)
	}
	q := s.JobDir(job.Queued, "", "r1")
	only(t, s, "r1", q)
	got := readJob(t, q)
	if got.Status != job.Queued || got.Attempts != 0 || got.Reason != job.ReasonRetried || got.Error != "" ||
		got.ExitCode != nil || got.FinishedAt != nil || got.StartedAt != nil || got.ClaimToken != "" || got.Kind != "noop" {
		t.Fatalf("retried job: %+v", got)
	}
	if *j != *got {
		t.Fatalf("returned %+v, on disk %+v", j, got)
	}
	if string(readRaw(t, filepath.Join(q, job.PromptFile))) != testPrompt {
		t.Fatal("prompt changed")
	}
	mustNotExist(t, filepath.Join(q, job.ControlFile))
	mustNotExist(t, s.LockPath("r1"))
	after := events(t, q)
	if len(after) != len(before)+1 {
		t.Fatalf("%d events, want %d", len(after), len(before)+1)
	}
	if ev := after[len(after)-1]; ev.From != job.Killed || ev.To != job.Queued || ev.Reason != job.ReasonRetried || ev.Actor != "farroctl" {
		t.Fatalf("last event %+v", ev)
	}
	// It runs again, as a new job would.
	c, err := s.Claim("r1", holder)
	if err != nil {
		t.Fatal(err)
	}
	if c.Envelope().Lifecycle.Attempts != 1 {
		t.Fatalf("attempts %d after the claim", c.Envelope().Lifecycle.Attempts)
	}
}

// A succeeded job is retried only when asked; other states never.
func TestRetryRefusesWhatItMayNotLeave(t *testing.T) {
	t.Parallel()
	s := setup(t)
	finish(t, s, "ok", job.Succeeded)
	submit(t, s, "q")
	if _, err := s.Retry("ok", "farroctl", false); !errors.Is(err, job.ErrState) {
		t.Fatalf("retry of a succeeded job without includeSucceeded: %v, want ErrState", err)
	}
	only(t, s, "ok", s.JobDir(job.Succeeded, "", "ok"))
	if _, err := s.Retry("q", "farroctl", true); !errors.Is(err, job.ErrState) {
		t.Fatalf("retry of a queued job: %v, want ErrState", err)
	}
	if _, err := s.Retry("nope", "farroctl", true); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("retry of no job: %v, want ErrNotFound", err)
	}
	if err := fsq.TryLock(s.LockPath("ok"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retry("ok", "farroctl", true); !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("retry of a locked job: %v, want ErrLocked", err)
	}
	_ = fsq.Unlock(s.LockPath("ok"))
	if j, err := s.Retry("ok", "farroctl", true); err != nil || j.Status != job.Queued {
		t.Fatalf("retry --succeeded: %+v, %v", j, err)
	}
	only(t, s, "ok", s.JobDir(job.Queued, "", "ok"))
}

// A retry cut between its rename and its status write leaves a terminal
// status in incoming/ (under a dead lock, or none after a power cut):
// recovery moves it back to its terminal directory — a terminal status
// wins — and it never runs.
func TestRetryCutAfterItsRenameIsRolledBack(t *testing.T) {
	t.Parallel()
	for _, st := range []job.State{job.Killed, job.Succeeded} {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			place(t, s, job.Queued, "", "r1", st, nil)
			if _, err := s.Claim("r1", holder); !errors.Is(err, job.ErrState) {
				t.Fatalf("claim of a half-retried job: %v, want ErrState", err)
			}
			deadOwner(t, s, "r1")
			out, err := s.RecoverLock("r1", "watchdogd", "owner died")
			if err != nil {
				t.Fatal(err)
			}
			if out.Action != job.ActionRolledForward || out.To != st {
				t.Fatalf("outcome %+v, want rolled forward to %s", out, st)
			}
			only(t, s, "r1", s.JobDir(st, "", "r1"))
			mustNotExist(t, s.LockPath("r1"))
			// Without a lock (a power cut loses it): the same.
			place(t, s, job.Queued, "", "r2", st, nil)
			if out, err := s.Reconcile("r2", "watchdogd", "status mismatch"); err != nil || out.To != st {
				t.Fatalf("reconcile: %+v, %v", out, err)
			}
			only(t, s, "r2", s.JobDir(st, "", "r2"))
		})
	}
}

// rm deletes a terminal job for good and refuses any other.
func TestRemoveDeletesOnlyTerminalJobs(t *testing.T) {
	t.Parallel()
	s := setup(t)
	finish(t, s, "ok", job.Succeeded)
	finish(t, s, "k", job.Killed)
	submit(t, s, "q")
	for _, id := range []string{"ok", "k"} {
		if _, err := s.Remove(id, "farroctl"); err != nil {
			t.Fatalf("rm %s: %v", id, err)
		}
		if _, err := s.Locate(id); !errors.Is(err, job.ErrNotFound) {
			t.Fatalf("%s after rm: %v", id, err)
		}
		mustNotExist(t, s.LockPath(id))
	}
	dirEmpty(t, s.Path(job.TmpDir))
	if _, err := s.Remove("q", "farroctl"); !errors.Is(err, job.ErrState) {
		t.Fatalf("rm of a queued job: %v, want ErrState", err)
	}
	only(t, s, "q", s.JobDir(job.Queued, "", "q"))
	if _, err := s.Remove("ok", "farroctl"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("rm of a removed job: %v, want ErrNotFound", err)
	}
	// A status that disagrees with the directory is left for fsck.
	place(t, s, job.Succeeded, "", "odd", job.Failed, nil)
	if _, err := s.Remove("odd", "farroctl"); !errors.Is(err, job.ErrState) {
		t.Fatalf("rm of a mismatched job: %v, want ErrState", err)
	}
	if _, err := os.Stat(s.JobDir(job.Succeeded, "", "odd")); err != nil {
		t.Fatal(err)
	}
}
