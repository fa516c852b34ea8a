package job

import (
	"errors"
	"os"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// SettleTimeout bounds LocateSettled.
const SettleTimeout = time.Second

// LocateSettled is Locate for those who do not hold the job's lock
// (operator commands). Locate lstats the state directories one after
// another, so a job moving meanwhile can be seen twice (a forward move)
// or not at all (a backward one). Both are treated as transient:
//
//   - several places: the job's lock is taken (as actor) and the job
//     located again while holding it; every transition happens under that
//     lock, so that answer is a snapshot and final. A busy lock (a claim,
//     a move, the running job's own agent) means locate again after a
//     short pause. Past SettleTimeout, a duplicate is reported only if
//     every copy still exists.
//   - not found: located again after a short pause; ErrNotFound is
//     reported after three misses in a row (or past SettleTimeout).
//
// One place is returned at once, as Locate does.
func (s *Spool) LocateSettled(id, actor string) ([]Location, error) {
	deadline := time.Now().Add(SettleTimeout)
	pause := time.Millisecond
	misses := 0
	for {
		locs, err := s.Locate(id)
		switch {
		case err == nil && len(locs) == 1:
			return locs, nil
		case err != nil && !errors.Is(err, ErrNotFound):
			return nil, err
		case err != nil: // not found
			misses++
			if misses >= 3 || time.Now().After(deadline) {
				return nil, err
			}
		default: // several places
			misses = 0
			if locked, ok, lerr := s.locateLocked(id, actor); ok {
				return locked, lerr
			}
			if time.Now().After(deadline) {
				if stillThere(locs) {
					return locs, nil
				}
				return s.Locate(id)
			}
		}
		time.Sleep(pause)
		if pause *= 2; pause > 50*time.Millisecond {
			pause = 50 * time.Millisecond
		}
	}
}

// locateLocked locates id while holding its lock; ok is false when the
// lock could not be taken (held by someone, or not writable).
func (s *Spool) locateLocked(id, actor string) (locs []Location, ok bool, err error) {
	lock := s.LockPath(id)
	if fsq.TryLock(lock, NewOwner(actor, "").marshal()) != nil {
		return nil, false, nil
	}
	defer func() { _ = fsq.Unlock(lock) }()
	locs, err = s.Locate(id)
	return locs, true, err
}

// stillThere reports whether every location still exists, checked
// forwards and backwards: a job seen twice only because it moved while
// the directories were listed fails it.
func stillThere(locs []Location) bool {
	for pass := 0; pass < 2; pass++ {
		for i := range locs {
			l := locs[i]
			if pass == 1 {
				l = locs[len(locs)-1-i]
			}
			if _, err := os.Lstat(l.Dir); err != nil {
				return false
			}
		}
	}
	return true
}
