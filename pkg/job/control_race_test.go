package job_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/farro-dev/farro/pkg/job"
)

// An operator's request that reaches a running job just as its attempt
// ends travels with the job; it names that attempt, and whoever moves the
// job next applies it, exactly once: the job ends held or cancelled, never
// runs again, and the request file is gone.
func TestAcknowledgedControlIsAppliedAfterTheRace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		action string
		commit job.State // what the agent committed, not having seen the request
		next   func(s *job.Spool) (*job.Job, error)
		want   job.State
		reason string
	}{
		{"cancel-vs-failed", job.ControlCancel, job.Failed, func(s *job.Spool) (*job.Job, error) {
			return s.Move("j1", job.Failed, job.Deferred, "managerd", "retry", nil) // managerd's retry
		}, job.Killed, job.ReasonCancelled},
		// failed -> held is no legal move: the request travels on with the
		// retry and the next claim applies it instead of running the job.
		{"hold-vs-failed", job.ControlHold, job.Failed, func(s *job.Spool) (*job.Job, error) {
			if _, err := s.Move("j1", job.Failed, job.Queued, "managerd", "retry", nil); err != nil {
				return nil, err
			}
			if _, err := s.Claim("j1", holder); !errors.Is(err, job.ErrControlled) {
				t.Errorf("claim = %v, want ErrControlled", err)
			}
			return nil, nil
		}, job.Held, job.ReasonHeld},
		{"cancel-vs-stale", job.ControlCancel, job.Stale, func(s *job.Spool) (*job.Job, error) {
			return s.Move("j1", job.Stale, job.Queued, "managerd", "requeued", nil)
		}, job.Killed, job.ReasonCancelled},
		{"hold-vs-release", job.ControlHold, job.Queued, func(s *job.Spool) (*job.Job, error) {
			_, err := s.Claim("j1", holder) // the next claim applies it instead of running
			if !errors.Is(err, job.ErrControlled) {
				t.Errorf("claim = %v, want ErrControlled", err)
			}
			return nil, nil
		}, job.Held, job.ReasonHeld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			c := claim(t, s, "j1")
			if err := s.RequestControl("w1", "j1", job.Control{Action: tc.action}); err != nil {
				t.Fatal(err)
			}
			if err := c.Commit(tc.commit, "", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := tc.next(s); err != nil {
				t.Fatal(err)
			}
			dir := s.JobDir(tc.want, "", "j1")
			only(t, s, "j1", dir)
			j := readJob(t, dir)
			if j.Status != tc.want || j.Reason != tc.reason {
				t.Fatalf("job %s (%q), want %s (%q)", j.Status, j.Reason, tc.want, tc.reason)
			}
			mustNotExist(t, filepath.Join(dir, job.ControlFile))
			// A hold costs no attempt (Control.Refund); a cancel keeps it.
			want := 1
			if tc.action == job.ControlHold {
				want = 0
			}
			if j.Attempts != want {
				t.Fatalf("attempts %d, want %d", j.Attempts, want)
			}
		})
	}
}

// A request made for another claim of the job (not its last attempt) is
// discarded by the claim: the job runs.
func TestControlOfAnotherAttemptIsDiscarded(t *testing.T) {
	t.Parallel()
	s := setup(t)
	submit(t, s, "j1")
	b, _ := json.Marshal(job.Control{Action: job.ControlCancel, Actor: "farroctl", ClaimToken: "not-this-one", Attempt: 7})
	writeRaw(t, filepath.Join(s.JobDir(job.Queued, "", "j1"), job.ControlFile), b)
	c, err := s.Claim("j1", holder)
	if err != nil {
		t.Fatalf("claim = %v", err)
	}
	mustNotExist(t, filepath.Join(c.Envelope().Runtime.Dir, job.ControlFile))
	if p, err := c.PendingControl(); p != nil || err != nil {
		t.Fatalf("pending control after the claim: %v, %v", p, err)
	}
}

// The request names the attempt it was made for.
func TestControlNamesItsAttempt(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	if err := s.RequestControl("w1", "j1", job.Control{Action: job.ControlHold}); err != nil {
		t.Fatal(err)
	}
	p, err := c.PendingControl()
	if err != nil || p == nil {
		t.Fatalf("pending = %v, %v", p, err)
	}
	if p.ClaimToken != c.Token() || p.Attempt != 1 {
		t.Fatalf("request names claim %q attempt %d, want %q and 1", p.ClaimToken, p.Attempt, c.Token())
	}
}

// Refund gives back the attempt a hold was made for, once: not for
// cancel or kill, and not when that attempt was already given back (a
// drain release).
func TestHoldRefundsItsAttemptOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action         string
		attempt, have  int
		wantAfterApply int
	}{
		{job.ControlHold, 2, 2, 1},
		{job.ControlHold, 2, 1, 1}, // released by a drain: already given back
		{job.ControlHold, 0, 2, 1}, // an older farro's request: the current attempt
		{job.ControlHold, 1, 0, 0},
		{job.ControlCancel, 2, 2, 2},
		{job.ControlKill, 2, 2, 2},
	} {
		j := &job.Job{Attempts: tc.have}
		job.Control{Action: tc.action, Attempt: tc.attempt}.Refund(j)
		if j.Attempts != tc.wantAfterApply {
			t.Errorf("%s for attempt %d on attempts %d: %d, want %d", tc.action, tc.attempt, tc.have, j.Attempts, tc.wantAfterApply)
		}
	}
}

// A hold that travelled with a failed job through managerd's retry
// (failed -> deferred) is applied at the promotion, and the attempt it was
// made for is given back.
func TestTravellingHoldRefundsAtPromotion(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	if err := s.RequestControl("w1", "j1", job.Control{Action: job.ControlHold}); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(job.Failed, "boom", nil); err != nil {
		t.Fatal(err)
	}
	if j, err := s.Move("j1", job.Failed, job.Deferred, "managerd", "retry", nil); err != nil || j.Status != job.Deferred || j.Attempts != 1 {
		t.Fatalf("retry: %v, %+v", err, j)
	}
	j, err := s.Move("j1", job.Deferred, job.Queued, "managerd", "not_before reached", nil)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != job.Held || j.Attempts != 0 || j.Reason != job.ReasonHeld {
		t.Fatalf("promoted to %s with attempts %d (%q), want held with 0", j.Status, j.Attempts, j.Reason)
	}
	only(t, s, "j1", s.JobDir(job.Held, "", "j1"))
	if got := readJob(t, s.JobDir(job.Held, "", "j1")); got.Attempts != 0 {
		t.Fatalf("job.json says attempts %d", got.Attempts)
	}
}

// A hold that lands as the job's last attempt fails: managerd would kill
// the job out of attempts, where the request could never apply. The job
// is kept (queued, carrying the request) and the next claim holds it.
func TestHoldOnTheLastAttemptIsNotLost(t *testing.T) {
	t.Parallel()
	s := setup(t)
	if _, err := s.Submit(job.SubmitRequest{ID: "j1", Kind: "noop", Prompt: []byte(`{}`), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim("j1", holder)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RequestControl("w1", "j1", job.Control{Action: job.ControlHold}); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(job.Failed, "exit 1", nil); err != nil {
		t.Fatal(err)
	}
	j, err := s.Move("j1", job.Failed, job.Killed, "managerd", "failed 1 times: out of attempts", nil)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != job.Queued {
		t.Fatalf("out-of-attempts move with a pending hold: %s, want queued", j.Status)
	}
	if _, err := s.Claim("j1", holder); !errors.Is(err, job.ErrControlled) {
		t.Fatalf("claim = %v, want ErrControlled", err)
	}
	dir := s.JobDir(job.Held, "", "j1")
	only(t, s, "j1", dir)
	if j := readJob(t, dir); j.Status != job.Held || j.Attempts != 0 {
		t.Fatalf("job %s attempts %d, want held with its attempt given back", j.Status, j.Attempts)
	}
}

// A second hold that reached a running job as its agent was already
// committing the first one travels into held/ with the job. The job is
// where that request asks: an operator's release applies it (drops it)
// and releases the job, instead of refusing for ever ("an operator's
// request keeps it held"; the kill storm found one such job).
func TestLateDuplicateHoldDoesNotPinTheJob(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	if err := s.RequestControl("w1", "j1", job.Control{Action: job.ControlHold}); err != nil {
		t.Fatal(err)
	}
	ctl, err := c.PendingControl()
	if err != nil || ctl == nil {
		t.Fatalf("pending control %v, %v", ctl, err)
	}
	// The agent commits the hold; the duplicate is written after its
	// check, so the commit carries it into held/.
	if err := c.Commit(job.Held, "held by operator", func(j *job.Job) { ctl.Refund(j) }); err != nil {
		t.Fatal(err)
	}
	mustExist(t, filepath.Join(s.JobDir(job.Held, "", "j1"), job.ControlFile))
	if _, err := s.Move("j1", job.Held, job.Queued, "farroctl", "released", nil); err != nil {
		t.Fatalf("release of a held job carrying a fulfilled hold: %v", err)
	}
	q := s.JobDir(job.Queued, "", "j1")
	mustNotExist(t, filepath.Join(q, job.ControlFile))
	if j := readJob(t, q); j.Status != job.Queued {
		t.Fatalf("status %s after release", j.Status)
	}
}
