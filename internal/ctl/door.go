package ctl

import (
	"errors"
	"fmt"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// door is where farroctl's job commands find, create and move jobs: a
// spool (spoolDoor) or a database (storeDoor, store.go). The commands'
// logic (which action takes which state, retries of a busy job, the
// filters, the output) is written once over it.
type door interface {
	// locate returns the one place of job id (job.ErrNotFound).
	locate(id string) (job.Location, error)
	// read returns the lifecycle of job id found at loc.
	read(loc job.Location, id string) (*job.Job, error)
	move(id string, from, to job.State, reason string) (*job.Job, error)
	requestControl(loc job.Location, id string, c job.Control) error
	retry(id string, succeeded bool) (*job.Job, error)
	remove(id string) error
	// transient reports an error after which the job is located again
	// and the step tried again (it was busy, or moved meanwhile).
	transient(err error) bool
	// stuck is the error of a job still busy after every try.
	stuck(id string, last error) error
	// resolve turns an argument into a job ID (an ID, or the unique
	// prefix of one).
	resolve(arg string) (string, error)
	selectJobs(states []job.State, f Filter) ([]string, error)
	submit(reqs []job.SubmitRequest) ([]*job.Job, []error)
	// defaultMaxAttempts is the attempt limit written into a job
	// submitted without one.
	defaultMaxAttempts() int
	audit(a job.Audit)
}

// spoolDoor is the spool at a Ctl's Root.
type spoolDoor struct {
	c   *Ctl
	s   *job.Spool
	res *resolver
}

func (c *Ctl) spoolDoor(s *job.Spool) *spoolDoor {
	return &spoolDoor{c: c, s: s, res: newResolver(s)}
}

func (d *spoolDoor) locate(id string) (job.Location, error) {
	locs, err := d.s.LocateSettled(id, Actor)
	if err != nil {
		return job.Location{}, err
	}
	if len(locs) > 1 {
		return job.Location{}, fmt.Errorf("%w: found in %d places; run farroctl fsck", job.ErrDuplicate, len(locs))
	}
	return locs[0], nil
}

func (d *spoolDoor) read(loc job.Location, _ string) (*job.Job, error) { return job.ReadJob(loc.Dir) }

func (d *spoolDoor) move(id string, from, to job.State, reason string) (*job.Job, error) {
	j, err := d.s.Move(id, from, to, Actor, reason, nil)
	if errors.Is(err, job.ErrState) {
		return nil, fmt.Errorf("%v (status and directory disagree; run farroctl fsck)", err)
	}
	return j, err
}

func (d *spoolDoor) requestControl(loc job.Location, id string, c job.Control) error {
	return d.s.RequestControl(loc.Agent, id, c)
}

func (d *spoolDoor) retry(id string, succeeded bool) (*job.Job, error) {
	return d.s.Retry(id, Actor, succeeded)
}

func (d *spoolDoor) remove(id string) error {
	_, err := d.s.Remove(id, Actor)
	return err
}

func (d *spoolDoor) transient(err error) bool {
	return errors.Is(err, fsq.ErrLocked) || errors.Is(err, fsq.ErrVanished) || errors.Is(err, job.ErrNotFound)
}

func (d *spoolDoor) stuck(id string, last error) error {
	if errors.Is(last, fsq.ErrLocked) {
		return fmt.Errorf("busy: its lock %s stays held (an agent, managerd, or a stuck or crashed process has it; farroctl show %s, farroctl fsck)", d.s.LockPath(id), id)
	}
	return fmt.Errorf("kept moving while farroctl acted on it: %v", last)
}

func (d *spoolDoor) resolve(arg string) (string, error) { return d.res.resolve(arg) }

func (d *spoolDoor) selectJobs(states []job.State, f Filter) ([]string, error) {
	return d.c.selectJobs(d.s, states, f)
}

func (d *spoolDoor) submit(reqs []job.SubmitRequest) ([]*job.Job, []error) {
	if len(reqs) == 1 {
		j, err := d.s.Submit(reqs[0])
		return []*job.Job{j}, []error{err}
	}
	return d.s.SubmitMany(reqs)
}

func (d *spoolDoor) defaultMaxAttempts() int {
	n, _ := defaultMaxAttempts(d.s)
	return n
}

func (d *spoolDoor) audit(a job.Audit) { d.c.audit(d.s, a) }
