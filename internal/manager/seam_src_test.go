package manager

import (
	"testing"

	"github.com/farro-dev/farro/internal/seamcheck"
)

// jobFuncs are the functions of pkg/job the manager may call: they
// compute, and never touch the spool (what an ID may be).
var jobFuncs = map[string]bool{"ValidateID": true}

// TestNoJobDoorButTheStore reads the manager's source: its spool engine
// reaches jobs through the spool store (*spoolstore.Store) only. No file
// imports pkg/fsq or the os package (no path of the spool is opened,
// listed or removed here), no value of type job.Spool is named, the
// store is never asked for the spool behind it (Spool()), and no
// function of pkg/job is called but the pure ones of jobFuncs (no
// ReadJob: a job is read through the store).
func TestNoJobDoorButTheStore(t *testing.T) {
	t.Parallel()
	seamcheck.SpoolStoreOnly{JobFuncs: jobFuncs, MinFiles: 8}.Check(t, "the manager")
}
