package ctl

import (
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/pkg/job"
)

// Where a job's attempt limit comes from, as ls and show say it.
const (
	LimitFromJob      = "job"                     // its own max_attempts
	LimitFromManagerd = "managerd --max-attempts" // the running (or last) managerd's
	LimitFromDefault  = "default"                 // job.DefaultMaxAttempts: no managerd has run
)

// defaultMaxAttempts is the limit of a job whose max_attempts is 0: the
// --max-attempts that managerd advertises in its registry record (the
// live one, or the last one that ran), else job.DefaultMaxAttempts.
func defaultMaxAttempts(s *job.Spool) (int, string) {
	if l, err := registry.List(s); err == nil {
		for _, d := range l.Daemons {
			if d.ID == "managerd" && d.MaxAttempts > 0 {
				return d.MaxAttempts, LimitFromManagerd
			}
		}
	}
	return job.DefaultMaxAttempts, LimitFromDefault
}

// limits resolves attempt limits for many jobs with one registry read.
type limits struct {
	def  int
	from string
}

func newLimits(s *job.Spool) limits {
	def, from := defaultMaxAttempts(s)
	return limits{def: def, from: from}
}

// of returns the limit that applies to j and where it comes from.
func (l limits) of(j *job.Job) (int, string) {
	if j.MaxAttempts > 0 {
		return j.MaxAttempts, LimitFromJob
	}
	return l.def, l.from
}
