package ctl

import (
	"time"

	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/pkg/job"
)

// maxCheckJobs is how many jobs a pipeline run submits for one due check
// at most (sc-NAME-DUE, sc-NAME-DUE-2, ...), as pipeline.Run does.
const maxCheckJobs = 20

// CheckJob is the job that is checking a due source: queued (or deferred
// to its not_before), running, held, or failed or stale and waiting for
// managerd's retry.
type CheckJob struct {
	ID    string    `json:"id"`
	State job.State `json:"state"`
}

// pendingCheck finds the live job of s's current due check, if any: the
// check jobs of a due stamp are submitted one after the other (the next
// only once the previous one ended without checking), so the first ID
// that does not exist ends the search. Only jobs not in a terminal state
// count: a killed one no longer checks anything.
func pendingCheck(sp *job.Spool, s *source.Source) *CheckJob {
	for n := 1; n <= maxCheckJobs; n++ {
		id := pipeline.CheckJobID(s.Name, s.DueStamp(), n)
		locs, err := sp.Locate(id)
		if err != nil {
			return nil
		}
		for _, l := range locs {
			if !l.State.Terminal() {
				return &CheckJob{ID: id, State: l.State}
			}
		}
	}
	return nil
}

// sourceStateWithJob is SourceState, except that a due source whose check
// job exists is "checking" rather than "due"; it returns the job too.
func sourceStateWithJob(sp *job.Spool, s *source.Source, now time.Time) (string, *CheckJob) {
	st := SourceState(s, now)
	if st != "due" {
		return st, nil
	}
	cj := pendingCheck(sp, s)
	if cj == nil {
		return st, nil
	}
	return "checking", cj
}

// stateText is a source's state for the tables: "checking (job ID
// STATE)" when its check job exists.
func stateText(state string, cj *CheckJob) string {
	if cj == nil {
		return state
	}
	return state + " (job " + cj.ID + " " + checkJobWord(cj.State) + ")"
}

// checkJobWord names a check job's state for humans.
func checkJobWord(s job.State) string {
	switch s {
	case job.InProgress:
		return "running"
	case job.Failed, job.Stale:
		return string(s) + ", awaiting retry"
	}
	return string(s)
}
