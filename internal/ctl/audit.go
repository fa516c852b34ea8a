package ctl

import (
	"os"
	"os/user"
	"strconv"

	"github.com/farro-dev/farro/pkg/job"
)

// audit appends an operator line for a farroctl action to the spool's
// event stream (job.Spool.Audit), with the OS user running farroctl. s nil
// opens the spool at Root. The action is done whatever happens here: a
// line that cannot be written is reported on stderr, never an error.
func (c *Ctl) audit(s *job.Spool, a job.Audit) {
	if s == nil {
		var err error
		if s, err = c.existing(); err != nil {
			c.warnf("audit line not written: %v", err)
			return
		}
	}
	a.Actor, a.UID = Actor, os.Getuid()
	if u, err := user.LookupId(strconv.Itoa(a.UID)); err == nil {
		a.User = u.Username
	}
	if err := s.Audit(a); err != nil {
		c.warnf("audit line not written: %v", err)
	}
}

// auditDone audits command (about target) once it succeeded: deferred by
// the commands that return a named error.
func (c *Ctl) auditDone(errp *error, command, target, reason string) {
	if *errp == nil {
		c.audit(nil, job.Audit{Command: command, Target: target, Reason: reason})
	}
}

// auditIDs collects up to a line's worth of job IDs, and counts them all.
type auditIDs struct {
	ids   []string
	count int
}

func (a *auditIDs) add(id string) {
	a.count++
	if len(a.ids) < 16 {
		a.ids = append(a.ids, id)
	}
}
