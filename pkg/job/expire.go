package job

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotExpired: retention found the job, under its lock, finished after
// the cutoff (an operator retried it and it finished again meanwhile).
var ErrNotExpired = errors.New("finished after the retention cutoff")

// Finished is when the job reached its state: finished_at, or updated_at
// when it is unset.
func (j *Job) Finished() time.Time {
	if j.FinishedAt != nil {
		return *j.FinishedAt
	}
	return j.UpdatedAt
}

// Expire is retention's Remove: it deletes terminal job id (succeeded or
// killed) under its lock, like Remove, but only if the job it reads there
// finished before cutoff. managerd's scan reads jobs without the lock, so
// what it saw may be gone by the time it acts: a job retried by an
// operator meanwhile is in incoming/ (ErrState), one that finished again
// is too recent (ErrNotExpired), and neither is touched. It returns the
// job that was removed.
//
// Errors: those of Remove, and ErrNotExpired.
func (s *Spool) Expire(id, actor string, cutoff time.Time) (*Job, error) {
	return s.removeTerminal(id, actor, "retention", "expire", func(j *Job) error {
		if f := j.Finished(); !f.Before(cutoff) {
			return fmt.Errorf("%w: finished at %s", ErrNotExpired, f.UTC().Format(time.RFC3339))
		}
		return nil
	})
}
