package manager

import (
	"github.com/farro-dev/farro/internal/metrics"
	"github.com/farro-dev/farro/pkg/job"
)

// counted records a move managerd made, for its metrics: a retry (failed
// -> deferred, stale -> queued), a job out of attempts (-> killed), or a
// promotion (deferred -> queued).
func counted(from, to job.State) {
	switch {
	case from == job.Deferred && to == job.Queued:
		metrics.Promoted()
	case to == job.Killed:
		metrics.OutOfAttempts(from)
	case to == job.Deferred, to == job.Queued:
		metrics.Retried(from)
	}
}
