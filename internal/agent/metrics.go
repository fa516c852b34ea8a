package agent

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/tally"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// SpoolStore is the store agentd claims from on a spool: the spool
// store with its bounded index of incoming/ (spoolstore.WithIndex), fed by
// a watch of the directory (rescanned every rescan; noNotify: rescans
// only), logging to log, and counting its claims in internal/tally (claim
// latency and queue wait, failed claims by reason), as agentd's metrics
// say.
func SpoolStore(sp *job.Spool, rescan time.Duration, noNotify bool, log zerolog.Logger) *spoolstore.Store {
	return spoolstore.New(sp, spoolstore.WithIndex(spoolstore.IndexConfig{
		Rescan: rescan, NoNotify: noNotify, Log: log,
		OnClaimed: tally.ClaimDone, OnClaimFailed: tally.ClaimFailed,
	}))
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
