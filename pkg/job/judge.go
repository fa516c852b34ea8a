package job

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/fsq"
)

// Verdicts on a claim lock's holder besides proc's (pid gone, pid reused,
// ...): what a recovery records and logs as the reason it judged by.
const (
	VerdictNoOwner  = "no owner file"
	VerdictBadOwner = "unreadable owner file"
	VerdictSilent   = "silent"
	VerdictNoLock   = "no lock"
)

// LockHolder is what a claim lock's owner file said when it was read:
// what recoverers (watchdogd, the spool store's Recover) judge, and what
// they check is still there before they recover (Unchanged).
type LockHolder struct {
	Raw     []byte // the owner file as read (nil when it could not be read)
	ReadErr error  // the read's error
	Owner   Owner  // parsed, when Err is nil
	Err     error  // the read's or the parse's error
}

// ReadLockHolder reads the owner file of the lock at path (capped, never
// blocking on what is planted there).
func ReadLockHolder(lock string) LockHolder {
	var h LockHolder
	h.Raw, h.ReadErr = fsq.ReadOwner(lock)
	h.Err = h.ReadErr
	if h.Err == nil {
		h.Owner, h.Err = ParseOwner(h.Raw)
	}
	return h
}

// Foreign reports whether the owner file belongs to another user: nothing
// can be proven about its holder, so it is never judged.
func (h LockHolder) Foreign() bool { return errors.Is(h.ReadErr, fs.ErrPermission) }

// Unchanged reports whether the lock at path still holds what h read:
// the same bytes, or still no readable owner file. What was read is
// compared, not whether it parsed: an owner file that a power cut left
// empty or torn reads fine and never parses.
func (h LockHolder) Unchanged(lock string) bool {
	cur, err := fsq.ReadOwner(lock)
	return (h.ReadErr == nil) == (err == nil) && (h.ReadErr != nil || bytes.Equal(cur, h.Raw))
}

// Judged is the owner file to pass to RecoverJudgedLock: what was read,
// or an empty slice for a lock judged without a readable owner file.
func (h LockHolder) Judged() []byte {
	if h.Raw == nil {
		return []byte{}
	}
	return h.Raw
}

// Judgement is JudgeHolder's answer.
type Judgement struct {
	// Dead: the holder is gone; recover its job (Verdict and Reason
	// say why).
	Dead    bool
	Verdict string
	Reason  string
	// Live: the owner process is alive (or on another machine, or
	// cannot be checked): only its silence can condemn it, and only
	// when it is an agent (Owner.Agent).
	Live bool
}

// JudgeHolder judges the holder of a claim lock from what its owner file
// said. unreadableFor is how long the owner file has been missing or
// unreadable, by the caller's own measure; it is judged dead once that
// reaches grace (a lock is made before its owner file). A foreign owner
// file (another user's) is neither dead nor live: it is left alone.
func JudgeHolder(h LockHolder, unreadableFor, grace time.Duration) Judgement {
	switch {
	case h.Foreign():
		return Judgement{}
	case h.Err != nil:
		if unreadableFor < grace {
			return Judgement{} // being created: mkdir comes before the owner file
		}
		if errors.Is(h.Err, fs.ErrNotExist) {
			return Judgement{Dead: true, Verdict: VerdictNoOwner,
				Reason: fmt.Sprintf("owner died: lock has no owner file after %s", roundJudge(unreadableFor))}
		}
		return Judgement{Dead: true, Verdict: VerdictBadOwner,
			Reason: fmt.Sprintf("owner died: owner file unreadable after %s: %v", roundJudge(unreadableFor), h.Err)}
	}
	if v := proc.Check(h.Owner.Identity); v.Dead() {
		return Judgement{Dead: true, Verdict: v.String(),
			Reason: fmt.Sprintf("owner died: %s (%s pid %d)", v, h.Owner.Actor, h.Owner.PID)}
	}
	return Judgement{Live: true}
}

// SilentReason is the reason a recovery of a holder silent for silence
// records.
func SilentReason(h LockHolder, silence time.Duration) string {
	return fmt.Sprintf("owner silent: no heartbeat for %s (%s pid %d)", roundJudge(silence), h.Owner.Actor, h.Owner.PID)
}

// roundJudge shortens a duration for a reason: tenths of a second below
// ten seconds, else whole seconds.
func roundJudge(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
