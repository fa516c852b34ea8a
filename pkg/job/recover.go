package job

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// Outcome says what a recovery did to one job.
type Outcome struct {
	ID     string `json:"id"`
	Action string `json:"action"` // see the Action* constants
	From   State  `json:"from,omitempty"`
	To     State  `json:"to,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Recovery actions.
const (
	ActionNone          = "none"           // consistent; only the lock was removed, if any
	ActionStale         = "stale"          // in-progress job moved to stale/
	ActionRolledBack    = "rolled-back"    // half-done claim undone: back to incoming/
	ActionRolledForward = "rolled-forward" // half-done commit completed
	ActionRepaired      = "repaired"       // status rewritten to match the location
)

// RecoverLock recovers job id whose lock is held by a dead (or silent)
// owner, or which has no lock at all (Reconcile takes one first). It rolls
// the half-done transaction forward or back so the job exists exactly once
// in the state its job.json names, then removes the lock.
//
// An in-progress job is first renamed to stale/ — the rename is atomic, so
// a silent owner that wakes up finds its job gone and stops — and then
// marked stale, or moved on to where a half-done commit was taking it.
func (s *Spool) RecoverLock(id, actor, why string) (Outcome, error) {
	return s.RecoverJudgedLock(id, actor, why, nil)
}

// RecoverJudgedLock is RecoverLock for a lock whose owner file held judged
// when its owner was found dead (nil: no owner file). Recoverers exclude
// each other with a mkdir of <lock>/recovering, then check that the lock
// still holds what was judged (an empty non-nil judged: still no owner
// file), so a lock that changed hands meanwhile (the
// dead one removed by another recoverer, a new one taken by a live agent)
// is never recovered or removed: that yields fsq.ErrLocked.
func (s *Spool) RecoverJudgedLock(id, actor, why string, judged []byte) (Outcome, error) {
	lock := s.LockPath(id)
	guard := filepath.Join(lock, recoveringDir)
	// The fsq.CrashPoint calls mark the steps for the crash-simulation
	// harness (test/crash); they do nothing in release builds.
	fsq.CrashPoint("recover/guard:before")
	if err := takeGuard(guard); err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return Outcome{ID: id, Action: ActionNone, Detail: "lock already gone"}, nil
		case errors.Is(err, fs.ErrExist):
			return Outcome{ID: id}, fmt.Errorf("recover %s: another recovery is at work: %w", id, fsq.ErrLocked)
		}
		return Outcome{ID: id}, fmt.Errorf("recover %s: %w", id, err)
	}
	if judged != nil {
		cur, err := fsq.ReadOwner(lock)
		same := err == nil && bytes.Equal(cur, judged)
		if len(judged) == 0 {
			// Judged without a readable owner: none, an empty one (it
			// is never fsynced; a power cut often leaves it empty), or
			// one that can never be read: a symlink, a directory, a
			// FIFO, an oversized file. TryLock never makes such an
			// owner, so no live holder has one. An owner this user may
			// not read (another user's) is never judged: callers leave
			// it alone.
			same = errors.Is(err, fs.ErrNotExist) || (err == nil && len(cur) == 0) || fsq.IsHostile(err)
		}
		if !same {
			_ = os.Remove(guard)
			return Outcome{ID: id}, fmt.Errorf("recover %s: the lock changed hands: %w", id, fsq.ErrLocked)
		}
	}
	out, err := s.recoverJob(id, actor, why)
	if err != nil {
		_ = os.Remove(guard)
		return out, err
	}
	fsq.CrashPoint("recover/unlock:before")
	// Move the lock out of the way in one atomic step before removing it:
	// a recoverer that took its guard in the meantime finds the lock gone
	// instead of racing a half-removed directory. Leftovers in tmp/ are
	// swept by managerd.
	trash := s.Path(TmpDir, id+LockSuffix+".recovered-"+randHex(4))
	if err := os.Rename(lock, trash); err != nil {
		return out, fmt.Errorf("recover %s: unlock: %w", id, err)
	}
	if err := fsq.Unlock(trash); err != nil {
		return out, err
	}
	fsq.CrashPoint("recover/unlock:after")
	return out, nil
}

// recoveringDir, inside a lock, marks a recovery at work.
const recoveringDir = "recovering"

// RecoveryGuardTimeout is the age past which a recovery guard is taken to
// be abandoned by a recoverer that died inside its recovery: killed, or
// cut off by a power cut (the guard is not fsynced, but may well survive
// one). A recovery takes milliseconds.
const RecoveryGuardTimeout = 30 * time.Second

// takeGuard makes the recovery guard with mkdir. An existing guard older
// than RecoveryGuardTimeout is abandoned: it is replaced, or nobody would
// ever recover the job again. Any other existing guard yields fs.ErrExist.
func takeGuard(guard string) error {
	err := os.Mkdir(guard, 0o755)
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, serr := os.Lstat(guard)
	if serr != nil || time.Since(fi.ModTime()) < RecoveryGuardTimeout {
		return err
	}
	if rerr := os.Remove(guard); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return err
	}
	return os.Mkdir(guard, 0o755)
}

// Reconcile takes job id's lock and recovers it as RecoverLock does. It is
// for jobs found in-progress without a lock, or whose status disagrees with
// their directory (after a power cut). fsq.ErrLocked means someone holds
// the job: not ours to fix.
func (s *Spool) Reconcile(id, actor, why string) (Outcome, error) {
	lock := s.LockPath(id)
	if err := fsq.TryLock(lock, NewOwner(actor, "").marshal()); err != nil {
		return Outcome{ID: id}, err
	}
	out, err := s.RecoverLock(id, actor, why)
	if err != nil {
		// The lock is ours and alive: left behind, nobody would ever
		// recover the job again.
		_ = fsq.Unlock(lock)
	}
	return out, err
}

func (s *Spool) recoverJob(id, actor, why string) (Outcome, error) {
	out := Outcome{ID: id, Action: ActionNone}
	locs, err := s.Locate(id)
	if errors.Is(err, ErrNotFound) {
		out.Detail = "no job for this lock"
		return out, nil
	}
	if err != nil {
		return out, err
	}
	if len(locs) > 1 {
		return out, fmt.Errorf("recover %s: %w: found in %d places; run farroctl fsck", id, ErrDuplicate, len(locs))
	}
	loc := locs[0]
	// A dead holder may have been killed in the middle of a job.json
	// write (a heartbeat, its commit): drop its temp file.
	dropTemps(loc.Dir, 0, true)
	if loc.State == InProgress {
		stale := s.JobDir(Stale, "", id)
		fsq.CrashPoint("recover/to-stale:before")
		if err := fsq.Rename(loc.Dir, stale); err != nil {
			return out, fmt.Errorf("recover %s: %w", id, err)
		}
		loc = Location{State: Stale, Dir: stale}
		j, err := ReadJob(stale)
		if err != nil {
			return s.quarantineOutcome(out, stale, err)
		}
		switch {
		case j.Status == InProgress:
			_, err := s.rewrite(j, stale, Stale, actor, why, func(j *Job) { j.FinishedAt = nowPtr() })
			out.Action, out.From, out.To = ActionStale, InProgress, Stale
			return out, err
		case j.Status == Queued:
			out.Action, out.From, out.To = ActionRolledBack, InProgress, Queued
			return out, s.renameTo(stale, Queued, id)
		case j.Status == Stale:
			// A commit to stale died before its rename: already there.
			out.Action, out.From, out.To = ActionRolledForward, InProgress, Stale
			return out, nil
		case CanTransition(InProgress, j.Status):
			out.Action, out.From, out.To = ActionRolledForward, InProgress, j.Status
			return out, s.renameTo(stale, j.Status, id)
		}
		// stale/ with an unexpected status: fall through to the general case.
	}
	j, err := ReadJob(loc.Dir)
	if err != nil {
		return s.quarantineOutcome(out, loc.Dir, err)
	}
	switch {
	case j.Status == loc.State:
		return out, nil
	case loc.State == Stale && j.Status == InProgress:
		out.Action, out.From, out.To = ActionStale, InProgress, Stale
		_, err := s.rewrite(j, loc.Dir, Stale, actor, why, nil)
		return out, err
	case loc.State == Queued && j.Status == InProgress:
		// The claim's rename was lost (power cut) but its status write
		// survived: the claim is undone; the attempt stays counted.
		out.Action, out.From, out.To = ActionRolledBack, InProgress, Queued
		_, err := s.rewrite(j, loc.Dir, Queued, actor, "claim rolled back: "+why, nil)
		return out, err
	case CanTransition(loc.State, j.Status) && j.Status != InProgress:
		out.Action, out.From, out.To = ActionRolledForward, loc.State, j.Status
		return out, s.renameTo(loc.Dir, j.Status, id)
	case loc.State == Stale && CanTransition(InProgress, j.Status):
		// A recovery that had moved a half-done commit (succeeded,
		// failed, held) out of in-progress/ died before moving it on: its
		// status is the commit's, so finish the move, never re-run it.
		out.Action, out.From, out.To = ActionRolledForward, InProgress, j.Status
		return out, s.renameTo(loc.Dir, j.Status, id)
	}
	if j.Status.Terminal() {
		// A terminal status wins wherever the job sits: an outcome once
		// written is never undone, and the job never runs again.
		out.Action, out.From, out.To = ActionRolledForward, loc.State, j.Status
		return out, s.renameTo(loc.Dir, j.Status, id)
	}
	if !CanTransition(j.Status, loc.State) {
		// Neither way is a legal transition: no repair can be trusted.
		return s.quarantineOutcome(out, loc.Dir, fmt.Errorf("%w: status %s in directory %s/: no legal transition either way", ErrCorrupt, j.Status, loc.State.Dir()))
	}
	out.Action, out.From, out.To = ActionRepaired, j.Status, loc.State
	out.Detail = fmt.Sprintf("status %s did not match directory %s/", j.Status, loc.State.Dir())
	_, err = s.rewrite(j, loc.Dir, loc.State, actor, "status repaired to match its directory", nil)
	return out, err
}

// rewrite sets the status of the job at dir in place (no rename) with an
// event. Recovery uses it where the directory already is the truth.
func (s *Spool) rewrite(j *Job, dir string, to State, actor, reason string, mutate func(*Job)) (*Job, error) {
	now := time.Now().UTC()
	nj := j.Clone()
	nj.Status, nj.UpdatedAt, nj.Reason = to, now, reason
	if mutate != nil {
		mutate(nj)
	}
	fsq.CrashPoint("recover/write:before", string(to))
	if err := fsq.WriteFile(dir+"/"+JobFile, nj.Marshal()); err != nil {
		return nil, fmt.Errorf("recover %s: %w", j.ID, err)
	}
	fsq.CrashPoint("recover/append:before", string(to))
	_ = s.recordEvent(dir, nj, Event{Time: now, Actor: actor, From: j.Status, To: to, Attempt: nj.Attempts, Reason: reason, CorrelationID: nj.CorrelationID}, eventSynced)
	return nj, nil
}

func (s *Spool) renameTo(dir string, st State, id string) error {
	fsq.CrashPoint("recover/rename:before", string(st))
	if err := fsq.Rename(dir, s.JobDir(st, "", id)); err != nil {
		return fmt.Errorf("recover %s: %w", id, err)
	}
	return nil
}

func (s *Spool) quarantineOutcome(out Outcome, dir string, err error) (Outcome, error) {
	if errors.Is(err, ErrCorrupt) {
		q, qerr := s.Quarantine(dir, err.Error())
		if qerr != nil {
			return out, fmt.Errorf("recover %s: %w (quarantine failed: %v)", out.ID, err, qerr)
		}
		out.Action, out.Detail = "quarantined", q
		return out, nil
	}
	return out, fmt.Errorf("recover %s: %w", out.ID, err)
}

func nowPtr() *time.Time {
	t := time.Now().UTC()
	return &t
}
