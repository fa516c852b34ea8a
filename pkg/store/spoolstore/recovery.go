package spoolstore

// What follows is the spool's own side of the store for watchdogd's
// recovery engine (internal/watchdog): the claim locks of incoming/ and
// their holders, the running jobs of in-progress/<agent>/, their
// executions, and the recovery of a dead or silent holder's job. It
// goes with engine.go (the watch of a state's directory, its cursors and
// listings, ReadIn, Reconcile, DurabilityErr), which the watchdog uses
// too. Every method is a thin delegation to pkg/job or pkg/fsq, as the
// watchdog made them itself before: nothing new is written, read or
// listed, and the steps (and their crash points, inside pkg/job) keep
// their order.
//
// IDs and agents are taken as found: a lock's name less its suffix, an
// agent's directory's name. They are not validated here (pkg/job does
// where it acts on a job); the watchdog validates what it must.
//
// Errors are pkg/job's and pkg/fsq's with their messages unchanged, with
// the seam's words added as in engine.go: a busy lock (fsq.ErrLocked) is
// store.ErrBusy, a lost race (fsq.ErrVanished) job.ErrNotFound.

import (
	"os"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// StatLock lstats job id's claim lock, incoming/<id>.lock (a directory
// when a holder made it; anything else was planted there). A lock that
// is not there is an error matching fs.ErrNotExist.
func (s *Store) StatLock(id string) (os.FileInfo, error) {
	return os.Lstat(s.sp.LockPath(id))
}

// LockHolder reads the owner file of job id's claim lock
// (job.ReadLockHolder): what job.JudgeHolder judges.
func (s *Store) LockHolder(id string) job.LockHolder {
	return job.ReadLockHolder(s.sp.LockPath(id))
}

// HolderUnchanged reports whether job id's lock still holds what h read
// (job.LockHolder.Unchanged).
func (s *Store) HolderUnchanged(id string, h job.LockHolder) bool {
	return h.Unchanged(s.sp.LockPath(id))
}

// QuarantineLock moves what was planted as job id's claim lock (a
// symlink, a file: not a directory) to corrupt/ (job.Spool.Quarantine)
// and returns where. A lock gone meanwhile is job.ErrNotFound.
func (s *Store) QuarantineLock(id, reason string) (string, error) {
	q, err := s.sp.Quarantine(s.sp.LockPath(id), reason)
	return q, spoolErr(err)
}

// StopExecutions stops whatever still runs of job id under its claim
// lock (job.Spool.StopExecutions) and says whether something still does.
func (s *Store) StopExecutions(id string) job.Executions {
	return s.sp.StopExecutions(id, s.sp.LockPath(id))
}

// RecoverJudgedLock recovers the job of a dead or silent holder of job
// id's lock, whose owner file held judged when it was judged
// (job.Spool.RecoverJudgedLock). A lock that changed hands meanwhile, or
// another recovery at work, is store.ErrBusy.
func (s *Store) RecoverJudgedLock(id, actor, why string, judged []byte) (job.Outcome, error) {
	out, err := s.sp.RecoverJudgedLock(id, actor, why, judged)
	return out, spoolErr(err)
}

// AgentNames lists in-progress/<agent>/ whole, names only (fsq.ScanDir):
// the running jobs of one agent. The agents themselves are
// StateNames(job.InProgress).
func (s *Store) AgentNames(agent string) (Entries, error) {
	return fsq.ScanDir(s.sp.AgentDir(agent))
}

// ReadRunning reads job id's job.json in in-progress/<agent>/ without
// its lock (job.ReadJob): a job no longer there is job.ErrNotFound.
func (s *Store) ReadRunning(agent, id string) (*job.Job, error) {
	j, err := job.ReadJob(s.sp.JobDir(job.InProgress, agent, id))
	return j, spoolErr(err)
}

// RunningChangedAt is when in-progress/<agent>/<id> last changed (its
// mtime, one lstat).
func (s *Store) RunningChangedAt(agent, id string) (time.Time, error) {
	fi, err := os.Lstat(s.sp.JobDir(job.InProgress, agent, id))
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

// KindOf is the kind of job id wherever it is now (job.Spool.Locate,
// then the first job.json that reads): "" if none can be read. A job's
// kind never changes.
func (s *Store) KindOf(id string) string {
	locs, err := s.sp.Locate(id)
	if err != nil {
		return ""
	}
	for _, loc := range locs {
		if j, err := job.ReadJob(loc.Dir); err == nil {
			return j.Kind
		}
	}
	return ""
}

// SweepJobTemps removes, from job id's directory in st (in-progress/
// under agent), the temp files of atomic writes of its job.json and its
// control file older than olderThan, whose writer died before renaming
// them (fsq.SweepTemps); it returns how many it removed.
func (s *Store) SweepJobTemps(st job.State, agent, id string, olderThan time.Duration) (int, error) {
	return fsq.SweepTemps(s.sp.JobDir(st, agent, id), olderThan, func(t string) bool {
		return t == job.JobFile || t == job.ControlFile
	})
}

// SweepQuarantineNoteTemps removes, from corrupt/, the temp files of
// quarantine notes older than olderThan whose writer died before
// renaming them (fsq.SweepTemps); it returns how many it removed.
func (s *Store) SweepQuarantineNoteTemps(olderThan time.Duration) (int, error) {
	return fsq.SweepTemps(s.sp.Path(job.CorruptDir), olderThan, func(t string) bool {
		return strings.HasSuffix(t, ".quarantine.json")
	})
}
