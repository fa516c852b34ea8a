package watchdog

import (
	"errors"

	"github.com/farro-dev/farro/internal/metrics"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// counted records one recovery attempt for watchdogd's metrics. A lock
// that someone else removed or took meanwhile is no recovery of ours.
func counted(out job.Outcome, verdict string, err error) {
	switch {
	case err != nil:
		if !errors.Is(err, store.ErrBusy) && !errors.Is(err, job.ErrNotFound) {
			metrics.RecoveryFailed()
		}
	case out.Action == job.ActionNone && out.Detail == "lock already gone":
	default:
		metrics.Recovered(out.Action, verdict == VerdictSilent)
	}
}
