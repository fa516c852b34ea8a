package tally

import (
	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// The help texts of the queue's gauges on a PostgreSQL store (the names
// and labels are the spool's).
const (
	JobsStoreHelp   = "Jobs in the database, by state; every state is present, zeros included."
	ByKindStoreHelp = "Queued jobs (state=\"queued\") by job kind; a kind farro does not know is counted as other. Every kind is present, zeros included."
	OldestStoreHelp = "created_at of the oldest queued job (Unix time); 0 when nothing is queued."
)

// StoreFamilies are the spool's gauges that make sense on a PostgreSQL
// store, from snap (its States, QueuedKinds, OldestQueued and Ready),
// and farro_build_info: farro_jobs{state}, farro_jobs_by_kind and
// farro_oldest_queued_job_timestamp_seconds, with the store's help
// texts. The claim locks, corrupt entries and relisting time are files
// of a spool and have no counterpart in a database: they are left out.
func StoreFamilies(program, version string, snap spoolview.Snapshot) []Family {
	var out []Family
	for _, f := range SpoolFamilies(program, version, snap) {
		switch f.Name {
		case LocksName, CorruptName, RescanName:
			continue
		case JobsName:
			f.Help = JobsStoreHelp
		case ByKindName:
			f.Help = ByKindStoreHelp
		case OldestName:
			f.Help = OldestStoreHelp
		}
		out = append(out, f)
	}
	return out
}

// StoreText is StoreFamilies in the Prometheus text format.
func StoreText(program, version string, snap spoolview.Snapshot) []byte {
	return Text(StoreFamilies(program, version, snap))
}

// StoreSnapshot is the view of a store's figures that StoreFamilies
// reads (ready: they were read).
func StoreSnapshot(g pgstore.Gauges) spoolview.Snapshot {
	return spoolview.Snapshot{At: g.At, States: g.States, QueuedKinds: g.QueuedKinds, OldestQueued: g.OldestQueued, Ready: true}
}
