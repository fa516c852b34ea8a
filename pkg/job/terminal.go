package job

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// ReasonRetried is the reason of a job an operator retried (Retry).
const ReasonRetried = "retried by operator"

// Retry is the one way out of a terminal state: an operator's retry
// (farroctl retry) puts a killed job — and, with includeSucceeded, a
// succeeded one — back in incoming/, keeping its ID, kind, priority,
// max_attempts, prompt and events history, with attempts reset to 0,
// reason ReasonRetried, and error, exit code, schedule, agent, claim and
// run times cleared; an event records it. Any control request the job
// carried is dropped (it named an attempt that is over). No daemon calls
// it, and the legal-transitions map keeps killed and succeeded terminal.
//
// It holds the job's lock throughout, and its order makes a crash at any
// point safe without a new recovery rule: the job directory is renamed
// into incoming/ first, its job.json still saying killed (or succeeded),
// and only then is job.json rewritten as queued. A crash between the two
// leaves a terminal status in incoming/ under the dead farroctl's lock:
// recovery's rule "a terminal status wins wherever the job sits" moves it
// back to its terminal directory, and the job never runs (an agent's claim
// needs the lock, and refuses a job whose status is not queued anyway).
// The retry was not acknowledged, so undoing it is right: the operator
// runs it again. The opposite order (status queued written in completed/
// first) would leave a non-terminal status in a terminal directory, which
// recovery would have to tell from a corruption; renaming into tmp/ first
// would leave the job in no state directory at all, where managerd's tmp/
// sweep would delete it. Once job.json says queued in incoming/ the retry
// is done: the event is history and may be lost to a crash.
//
// Errors: fsq.ErrLocked (busy: try later), ErrNotFound (not in the
// terminal directories it may leave), ErrState (its status disagrees with
// its directory: run fsck), ErrCorrupt (quarantined).
func (s *Spool) Retry(id, actor string, includeSucceeded bool) (*Job, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	from := []State{Killed}
	if includeSucceeded {
		from = append(from, Succeeded)
	}
	// The fsq.CrashPoint calls mark the steps for the crash-simulation
	// harness (test/crash); they do nothing in release builds.
	lock := s.LockPath(id)
	fsq.CrashPoint("retry/lock:before")
	if err := fsq.TryLock(lock, NewOwner(actor, "").marshal()); err != nil {
		return nil, fmt.Errorf("retry %s: %w", id, err)
	}
	defer func() {
		fsq.CrashPoint("retry/unlock:before")
		_ = fsq.Unlock(lock)
		fsq.CrashPoint("retry/unlock:after")
	}()
	j, src, err := s.readTerminal(id, from)
	if err != nil {
		return nil, fmt.Errorf("retry %s: %w", id, err)
	}
	now := time.Now().UTC()
	nj := j.Clone()
	nj.Status, nj.Reason, nj.UpdatedAt = Queued, ReasonRetried, now
	nj.Attempts, nj.Error, nj.ExitCode = 0, "", nil
	nj.NotBefore, nj.Agent, nj.ClaimToken, nj.CorrelationID = nil, "", "", ""
	nj.StartedAt, nj.LastHeartbeat, nj.FinishedAt = nil, nil, nil
	if err := dropControl(src); err != nil {
		return nil, fmt.Errorf("retry %s: %w", id, err)
	}
	dropTemps(src, TempGrace, false)
	dst := s.JobDir(Queued, "", id)
	q := string(j.Status)
	// The hint was dropped while the job was terminal; made durable by
	// the renames' fsyncs that follow, or lost (then only order is).
	if err := s.writeHint(nj); err != nil {
		return nil, fmt.Errorf("retry %s: priority hint: %w", id, err)
	}
	fsq.CrashPoint("retry/rename:before", q)
	if err := fsq.Rename(src, dst); err != nil {
		return nil, fmt.Errorf("retry %s: %w", id, err)
	}
	fsq.CrashPoint("retry/write:before", q)
	if err := fsq.WriteFile(dst+"/"+JobFile, nj.Marshal()); err != nil {
		// Put it back where its status says it is; if that fails too,
		// recovery does it (a terminal status wins).
		if rerr := fsq.Rename(dst, src); rerr != nil {
			err = fmt.Errorf("%w (and moving it back: %v)", err, rerr)
		}
		return nil, fmt.Errorf("retry %s: %w", id, err)
	}
	fsq.CrashPoint("retry/append:before", q)
	_ = s.recordEvent(dst, nj, Event{Time: now, Actor: actor, From: j.Status, To: Queued, Attempt: 0, Reason: ReasonRetried}, eventSynced)
	return nj, nil
}

// Remove deletes terminal job id (succeeded or killed) for good, under its
// lock (farroctl rm). The directory is first renamed into tmp/ (atomic and
// durable: the job is never seen half-deleted), then removed; a crash in
// between leaves a tmp/ leftover that managerd sweeps. Any other state is
// refused with ErrState: only an outcome may be deleted.
//
// Errors: fsq.ErrLocked (busy: try later), ErrNotFound, ErrState (not
// terminal, or its status disagrees with its directory), ErrCorrupt
// (quarantined, not deleted: corrupt/ is never deleted).
func (s *Spool) Remove(id, actor string) (*Job, error) {
	return s.removeTerminal(id, actor, "rm", "remove", nil)
}

// removeTerminal is Remove and Expire: under the job's lock it reads the
// job from a terminal directory, asks check (if any) whether it may go,
// renames it into tmp/ and removes it. op names the error's prefix, point
// the crash points' prefix.
func (s *Spool) removeTerminal(id, actor, op, point string, check func(*Job) error) (*Job, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	lock := s.LockPath(id)
	removeCrashPoint(point, "lock:before")
	if err := fsq.TryLock(lock, NewOwner(actor, "").marshal()); err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, id, err)
	}
	defer func() {
		removeCrashPoint(point, "unlock:before")
		_ = fsq.Unlock(lock)
		removeCrashPoint(point, "unlock:after")
	}()
	j, src, err := s.readTerminal(id, []State{Succeeded, Killed})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, id, err)
	}
	if check != nil {
		if err := check(j); err != nil {
			return nil, fmt.Errorf("%s %s: %w", op, id, err)
		}
	}
	trash := s.Path(TmpDir, id+".removed-"+randHex(4))
	if point == "expire" {
		trash = s.Path(TmpDir, id+".expired."+strconv.FormatInt(time.Now().UnixNano(), 36))
	}
	removeCrashPoint(point, "rename:before")
	if err := fsq.Rename(src, trash); err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, id, err)
	}
	why := "removed by operator"
	if op == "retention" {
		why = "removed by retention"
	}
	s.StreamRemoval(j, actor, why)
	removeCrashPoint(point, "remove:before")
	if err := fsq.RemoveAll(trash); err != nil {
		// The job is gone from the spool; the sweep finishes the removal.
		return j, fmt.Errorf("%s %s: removed from the spool, but %s is left for managerd's sweep: %w", op, id, trash, err)
	}
	return j, nil
}

// readTerminal reads job id from the first of the terminal directories
// from that holds it, checking that its status is that directory's. The
// caller holds the lock. A job in none of them is ErrNotFound, or ErrState
// naming where it is.
func (s *Spool) readTerminal(id string, from []State) (*Job, string, error) {
	for _, st := range from {
		dir := s.JobDir(st, "", id)
		j, err := ReadJob(dir)
		if errors.Is(err, fsq.ErrVanished) {
			continue
		}
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				if _, qerr := s.Quarantine(dir, err.Error()); qerr != nil {
					err = fmt.Errorf("%w (quarantine failed: %v)", err, qerr)
				}
			}
			return nil, "", err
		}
		if j.Status != st {
			return nil, "", fmt.Errorf("%w: status is %s in %s/ (run farroctl fsck)", ErrState, j.Status, st.Dir())
		}
		return j, dir, nil
	}
	locs, err := s.Locate(id)
	if err != nil {
		return nil, "", err
	}
	return nil, "", fmt.Errorf("%w: is %s", ErrState, locs[0].State)
}

// removeCrashPoint marks removeTerminal's steps for test/crash, as
// "remove/<step>" (rm) or "expire/<step>" (retention). Each name is
// written out whole: the harness finds its points by their literal call
// sites.
func removeCrashPoint(point, step string) {
	if point == "expire" {
		switch step {
		case "lock:before":
			fsq.CrashPoint("expire/lock:before")
		case "unlock:before":
			fsq.CrashPoint("expire/unlock:before")
		case "unlock:after":
			fsq.CrashPoint("expire/unlock:after")
		case "rename:before":
			fsq.CrashPoint("expire/rename:before")
		case "remove:before":
			fsq.CrashPoint("expire/remove:before")
		}
		return
	}
	switch step {
	case "lock:before":
		fsq.CrashPoint("remove/lock:before")
	case "unlock:before":
		fsq.CrashPoint("remove/unlock:before")
	case "unlock:after":
		fsq.CrashPoint("remove/unlock:after")
	case "rename:before":
		fsq.CrashPoint("remove/rename:before")
	case "remove:before":
		fsq.CrashPoint("remove/remove:before")
	}
}
