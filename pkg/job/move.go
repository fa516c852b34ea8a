package job

import (
	"errors"
	"fmt"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// Move is the transaction of every actor that does not hold a claim
// (managerd, farroctl, watchdogd's follow-ups): it moves job id from state
// from to state to (neither may be InProgress), holding the job's lock throughout so
// that it never races an agent or another mover. mutate may adjust the job
// (it sees the new status already set) and may veto by returning an error.
//
// A control request (control.json) made for the job's last attempt wins
// over to: the job goes where the request says, and the returned job
// shows it. Any control request is removed.
//
// Errors: fsq.ErrLocked (busy: try later), fsq.ErrVanished (not there),
// ErrState (its status is not from), ErrIllegal, ErrCorrupt (quarantined).
func (s *Spool) Move(id string, from, to State, actor, reason string, mutate func(*Job) error) (*Job, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	if !CanTransition(from, to) {
		return nil, fmt.Errorf("move %s: %w: %s -> %s", id, ErrIllegal, from, to)
	}
	if from == InProgress || to == InProgress {
		return nil, fmt.Errorf("move %s: in-progress jobs move only by their holder or by recovery, and only Claim makes them", id)
	}
	// The fsq.CrashPoint calls mark the steps for the crash-simulation
	// harness (test/crash), per from-to pair; they do nothing in release
	// builds.
	q := string(from) + "-" + string(to)
	lock := s.LockPath(id)
	fsq.CrashPoint("move/lock:before", q)
	if err := fsq.TryLock(lock, NewOwner(actor, "").marshal()); err != nil {
		return nil, fmt.Errorf("move %s: %w", id, err)
	}
	defer func() {
		fsq.CrashPoint("move/unlock:before", q)
		_ = fsq.Unlock(lock)
		fsq.CrashPoint("move/unlock:after", q)
	}()
	src := s.JobDir(from, "", id)
	j, err := ReadJob(src)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			if _, qerr := s.Quarantine(src, err.Error()); qerr != nil {
				err = fmt.Errorf("%w (quarantine failed: %v)", err, qerr)
			}
		}
		return nil, fmt.Errorf("move %s: %w", id, err)
	}
	if j.Status != from {
		return nil, fmt.Errorf("move %s: %w: status is %s in %s/", id, ErrState, j.Status, from.Dir())
	}
	// An operator's request for the job's last attempt that arrived as
	// that attempt finished wins over the mover's plan: it was
	// acknowledged, so it is applied now, exactly once.
	// One it cannot apply from here (hold of a failed job) travels on
	// with the job and is applied at its next move or claim.
	cto, creason, ctl, ok, present := pendingControl(src, from, j)
	switch {
	case ok && cto == from:
		// The job is already where the request asks: a second request
		// for the attempt whose first one put it here, written as its
		// agent committed. It is fulfilled: dropped below, and the
		// mover's plan (an operator's release, say) goes ahead.
	case ok:
		to, reason = cto, creason
		mutate = func(nj *Job) error { ctl.Refund(nj); return nil } // a hold costs no attempt
	case ctl != nil && ctl.For(j) && to.Terminal() && CanTransition(from, Queued):
		// The mover would end the job (out of attempts) where the
		// request could never be applied: the job goes to incoming/
		// instead, carrying the request, which its next claim applies.
		to, mutate = Queued, nil
		reason = "kept for the operator's " + ctl.Action + " request"
	}
	if present && (ok || ctl == nil || !ctl.For(j)) {
		if err := dropControl(src); err != nil {
			return nil, fmt.Errorf("move %s: %w", id, err)
		}
	}
	return s.apply(j, src, to, actor, reason, mutate)
}

// apply writes the new status into src/job.json, appends the event and
// renames src into to's directory. The caller holds the lock.
func (s *Spool) apply(j *Job, src string, to State, actor, reason string, mutate func(*Job) error) (*Job, error) {
	now := time.Now().UTC()
	nj := j.Clone()
	nj.Status, nj.UpdatedAt, nj.Reason = to, now, reason
	if to != Deferred {
		nj.NotBefore = nil
	}
	if to == Killed || to == Succeeded {
		if nj.FinishedAt == nil {
			nj.FinishedAt = &now
		}
	}
	if mutate != nil {
		if err := mutate(nj); err != nil {
			return nil, fmt.Errorf("move %s: %w", j.ID, err)
		}
	}
	dropTemps(src, TempGrace, false) // the job.json write below fsyncs src
	q := string(j.Status) + "-" + string(to)
	fsq.CrashPoint("move/write:before", q)
	if err := fsq.WriteFile(src+"/"+JobFile, nj.Marshal()); err != nil {
		return nil, fmt.Errorf("move %s: %w", j.ID, err)
	}
	fsq.CrashPoint("move/append:before", q)
	_ = s.recordEvent(src, nj, Event{Time: now, Actor: actor, From: j.Status, To: to, Attempt: nj.Attempts, Reason: reason, CorrelationID: nj.CorrelationID}, eventSynced)
	fsq.CrashPoint("move/rename:before", q)
	if err := fsq.Rename(src, s.JobDir(to, nj.Agent, j.ID)); err != nil {
		return nil, fmt.Errorf("move %s: %w", j.ID, err)
	}
	return nj, nil
}
