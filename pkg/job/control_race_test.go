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
			if j.Attempts != 1 && tc.commit != job.Queued {
				t.Fatalf("attempts %d: the job ran again", j.Attempts)
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
