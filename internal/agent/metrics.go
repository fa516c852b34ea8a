package agent

import (
	"errors"
	"time"

	"github.com/farro-dev/farro/internal/tally"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// claimed records a successful claim: its latency and how long the job
// had waited in incoming/ (since the updated_at the index read, i.e. when
// it was submitted, promoted, released or requeued).
func claimed(cd cand, start time.Time) {
	now := time.Now()
	var waited time.Duration
	if cd.queued != 0 {
		waited = now.Sub(time.Unix(0, cd.queued))
	}
	tally.ClaimDone(now.Sub(start), waited)
}

// claimFailure names a failed claim for farro_claims_failed_total.
func claimFailure(err error) string {
	switch {
	case errors.Is(err, fsq.ErrLocked):
		return "locked"
	case errors.Is(err, fsq.ErrVanished):
		return "vanished"
	case errors.Is(err, job.ErrSchema):
		return "schema"
	case errors.Is(err, job.ErrState):
		return "state"
	case errors.Is(err, job.ErrCorrupt):
		return "corrupt"
	}
	return "other"
}

// runFinished records a run once its commit was attempted: the outcome is
// the state committed, or lost when the job is still in-progress for us
// (taken away by recovery, or a commit that failed and is left to it).
func runFinished(c attempt, start time.Time) {
	outcome := tally.OutcomeLost
	switch c.Envelope().Lifecycle.Status {
	case job.Succeeded:
		outcome = tally.OutcomeSucceeded
	case job.Failed:
		outcome = tally.OutcomeFailed
	case job.Killed:
		outcome = tally.OutcomeKilled
	case job.Held:
		outcome = tally.OutcomeHeld
	case job.Queued:
		outcome = tally.OutcomeReleased
	}
	tally.RunFinished(c.Envelope().Lifecycle.Kind, outcome, time.Since(start))
}
