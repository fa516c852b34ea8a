package watchdog

import (
	"testing"

	"github.com/farro-dev/farro/internal/seamcheck"
)

// jobFuncs are the functions of pkg/job the watchdog may call: they
// compute, and never touch the spool (what an ID may be, how a lock's
// holder is judged from what its owner file said, the reason a silent
// holder's recovery records).
var jobFuncs = map[string]bool{"ValidateID": true, "JudgeHolder": true, "SilentReason": true}

// osAllowed are the files that may import the os package: shared.go
// removes this host's unreadable handler records (internal/localrun's
// files under the local directory, not jobs); its jobs are reached
// through store.Store.
var osAllowed = map[string]bool{"shared.go": true}

// TestNoJobDoorButTheStore reads the watchdog's source: its spool engine
// reaches jobs through the spool store (*spoolstore.Store) only, and its
// shared engine (shared.go) through store.Store. No file imports pkg/fsq
// (no watch, listing or sweep of the spool's directories is made here),
// nor the os package but those of osAllowed (no path of the spool is
// opened, listed or lstat'ed here), no value of type job.Spool is named,
// the store is never asked for the spool behind it (Spool()), and no
// function of pkg/job is called but the pure ones of jobFuncs (no
// ReadJob, no ReadLockHolder: a job and a lock's holder are read through
// the store).
func TestNoJobDoorButTheStore(t *testing.T) {
	t.Parallel()
	seamcheck.SpoolStoreOnly{JobFuncs: jobFuncs, OSAllowed: osAllowed, MinFiles: 5}.Check(t, "the watchdog")
}
