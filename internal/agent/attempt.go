package agent

import (
	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/job"
)

// attempt is one claimed job as the slots run it: what run, supervise and
// commit need of a claim, whatever keeps the job: a spool store's claim
// through spoolAttempt, any other store's (PostgreSQL) through
// storeAttempt (store.go).
type attempt interface {
	Envelope() job.Envelope
	Heartbeat() error
	PendingControl() (*job.Control, error)
	DropControl() error
	RecordHandler(id proc.Identity) error
	Fence() error
	Commit(to job.State, reason string, mutate func(*job.Job)) error
}

var (
	_ attempt = spoolAttempt{}
	_ attempt = (*storeAttempt)(nil)
)
