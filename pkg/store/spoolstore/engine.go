package spoolstore

// What follows is the spool's own side of the store, for managerd's
// event-driven engine (internal/manager): it drives the jobs nobody
// holds one state directory at a time, with the spool's scale in mind
// (a watch of the directories, cursors that list a bounded number of
// names per call, job.json read only when needed). Every method is a
// thin delegation to pkg/job or pkg/fsq, as the engine made them
// itself before: nothing new is written, read or listed.
//
// Errors are pkg/job's and pkg/fsq's with their messages unchanged; the
// two conditions the engine acts on are also the seam's words: a busy
// lock (fsq.ErrLocked) is store.ErrBusy, and a job gone from the
// directory it was looked for in (fsq.ErrVanished: someone else moved
// or removed it, a lost race) is job.ErrNotFound.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// mapped is an error of pkg/job or pkg/fsq with one of the seam's
// sentinels added to its chain; its message is the error's own.
type mapped struct{ sentinel, err error }

func (e *mapped) Error() string   { return e.err.Error() }
func (e *mapped) Unwrap() []error { return []error{e.sentinel, e.err} }

// spoolErr adds store.ErrBusy to a busy lock's error and job.ErrNotFound
// to a lost race's, keeping their messages.
func spoolErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fsq.ErrLocked) && !errors.Is(err, store.ErrBusy):
		return &mapped{sentinel: store.ErrBusy, err: err}
	case errors.Is(err, fsq.ErrVanished) && !errors.Is(err, job.ErrNotFound):
		return &mapped{sentinel: job.ErrNotFound, err: err}
	}
	return err
}

// ErrReadable is QuarantineCorrupt's: the job read fine under its lock,
// so it changed since it was found unreadable and was left in place.
var ErrReadable = errors.New("job readable under its lock: not quarantined")

// StateEvent is a change a StateWatch saw in a state's directory: a
// name that appeared (Created) or disappeared (Removed) there, or a
// Rescan (no name: events may have been lost, and at the start; list
// again). Dot files (temp files) are never reported.
type StateEvent = fsq.Event

// Entries are the names of a state's directory: Dirs those of
// directories (jobs, by name only: nothing is read), Hostile those of
// anything else that is no dot file (a symlink, a file planted there),
// which the caller quarantines.
type Entries = fsq.Entries

// StateWatchConfig configures WatchStates.
type StateWatchConfig struct {
	// States are the states whose directories are watched (job.Queued:
	// incoming/, where the claim locks come and go).
	States []job.State
	// Rescan is the period of the Rescan events (default 10s).
	Rescan time.Duration
	// NoNotify: no inotify, the Rescan events only.
	NoNotify bool
	// Coalesce, when positive, lets events gather that long before
	// they are read (fsq.WatchConfig.Coalesce).
	Coalesce time.Duration
	// OnFallback, if set, is called when inotify cannot be set up; the
	// watch goes on with the Rescan events only.
	OnFallback func(error)
}

// StateWatch is a watch of state directories (WatchStates).
type StateWatch struct {
	// Events delivers the watch's events; the first is a Rescan.
	Events <-chan StateEvent
	w      *fsq.Watcher
	states map[string]job.State
}

// WatchStates watches the directories of c.States (fsq.StartWatch) until
// ctx is done or Stop is called.
func (s *Store) WatchStates(ctx context.Context, c StateWatchConfig) *StateWatch {
	wcfg := fsq.WatchConfig{Rescan: c.Rescan, NoNotify: c.NoNotify, Coalesce: c.Coalesce, OnFallback: c.OnFallback}
	states := make(map[string]job.State, len(c.States))
	for _, st := range c.States {
		d := s.sp.StateDir(st)
		states[d] = st
		wcfg.Dirs = append(wcfg.Dirs, d)
	}
	w := fsq.StartWatch(ctx, wcfg)
	return &StateWatch{Events: w.Events, w: w, states: states}
}

// State is the state in whose directory ev happened ("" for a Rescan).
func (w *StateWatch) State(ev StateEvent) job.State { return w.states[ev.Dir] }

// Stop ends the watch and waits for it (fsq.Watcher.Stop).
func (w *StateWatch) Stop() error { return w.w.Stop() }

// StateCursor lists a state's directory a batch of names at a time
// (fsq.DirCursor): a lap over a directory of a million jobs costs a
// bounded amount per call. Not safe for concurrent use.
type StateCursor struct{ c *fsq.DirCursor }

// StateCursor returns a cursor over st's directory (not in-progress/);
// nothing is opened yet.
func (s *Store) StateCursor(st job.State) *StateCursor {
	return &StateCursor{c: fsq.NewDirCursor(s.sp.StateDir(st))}
}

// Next returns up to n names (n < 1: 4096) and whether they end the lap
// (fsq.DirCursor.Next): the next call starts a new one.
func (c *StateCursor) Next(n int) (Entries, bool, error) { return c.c.Next(n) }

// Close ends the lap under way and releases the directory.
func (c *StateCursor) Close() { c.c.Close() }

// StateNames lists st's directory whole, names only (fsq.ScanDir): for
// a directory kept small (failed/, stale/).
func (s *Store) StateNames(st job.State) (Entries, error) {
	return fsq.ScanDir(s.sp.StateDir(st))
}

// stateDir is the directory of job id in st, which is not in-progress
// (whose jobs are under their agent's directory).
func (s *Store) stateDir(st job.State, id string) (string, error) {
	if err := job.ValidateID(id); err != nil {
		return "", err
	}
	if st == job.InProgress {
		return "", fmt.Errorf("%s: %w: an in-progress job is under its agent's directory", id, job.ErrIllegal)
	}
	return s.sp.JobDir(st, "", id), nil
}

// ReadIn reads job id's job.json in st's directory (not in-progress/),
// without its lock (job.ReadJob): a job no longer there is
// job.ErrNotFound.
func (s *Store) ReadIn(st job.State, id string) (*job.Job, error) {
	dir, err := s.stateDir(st, id)
	if err != nil {
		return nil, err
	}
	j, err := job.ReadJob(dir)
	return j, spoolErr(err)
}

// ChangedAt is when job id's directory in st last changed (its mtime,
// one lstat): every write of its job.json renames into it.
func (s *Store) ChangedAt(st job.State, id string) (time.Time, error) {
	dir, err := s.stateDir(st, id)
	if err != nil {
		return time.Time{}, err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

// MoveListed is job.Spool.Move, for a caller that found the job in
// from's directory: a job no longer there is a lost race
// (job.ErrNotFound), not looked for elsewhere as Move does, and a busy
// lock is store.ErrBusy.
func (s *Store) MoveListed(id string, from, to job.State, actor, reason string, mutate func(*job.Job) error) (*job.Job, error) {
	j, err := s.sp.Move(id, from, to, actor, reason, mutate)
	return j, spoolErr(err)
}

// ExpireListed is Expire (job.Spool.Expire) with the engine's errors: a
// busy lock is store.ErrBusy with pkg/job's message.
func (s *Store) ExpireListed(id, actor string, cutoff time.Time) (*job.Job, error) {
	j, err := s.sp.Expire(id, actor, cutoff)
	return j, spoolErr(err)
}

// Reconcile repairs job id, whose status disagrees with its directory
// (a transaction cut short by a crash), under its lock
// (job.Spool.Reconcile). A busy lock (the transaction still running) is
// store.ErrBusy.
func (s *Store) Reconcile(id, actor, why string) (job.Outcome, error) {
	out, err := s.sp.Reconcile(id, actor, why)
	return out, spoolErr(err)
}

// QuarantineCorrupt moves job id of st, found unreadable (cause, a
// job.ErrCorrupt), to corrupt/ while holding its lock, after checking
// under the lock that it still is unreadable. It returns an error
// matching job.ErrCorrupt when it moved it or tried to (cause, and
// where it went or why it could not); ErrReadable when the job read
// fine under the lock; store.ErrBusy when the lock was busy.
func (s *Store) QuarantineCorrupt(st job.State, id, actor string, cause error) error {
	dir, err := s.stateDir(st, id)
	if err != nil {
		return err
	}
	lock := s.sp.LockPath(id)
	if err := fsq.TryLock(lock, ownerBytes(actor)); err != nil {
		return spoolErr(err)
	}
	defer fsq.Unlock(lock)
	if _, err := job.ReadJob(dir); err == nil {
		return ErrReadable
	} else if !errors.Is(err, job.ErrCorrupt) {
		return spoolErr(err)
	}
	q, err := s.sp.Quarantine(dir, cause.Error())
	if err != nil {
		return fmt.Errorf("%w (quarantine failed: %v)", cause, err)
	}
	return fmt.Errorf("%w (moved to %s)", cause, q)
}

// QuarantineUnnamed moves the entry name of st's directory, whose name
// cannot be a job ID (cause), to corrupt/: no lock can guard it, and no
// job can own it. The error returned matches job.ErrCorrupt.
func (s *Store) QuarantineUnnamed(st job.State, name string, cause error) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || st == job.InProgress {
		return fmt.Errorf("quarantine %q in %s/: not an entry of a state's directory", name, st.Dir())
	}
	q, err := s.sp.Quarantine(s.sp.JobDir(st, "", name), cause.Error())
	if err != nil {
		return fmt.Errorf("%w: %v (quarantine failed: %v)", job.ErrCorrupt, cause, err)
	}
	return fmt.Errorf("%w: %v (moved to %s)", job.ErrCorrupt, cause, q)
}

// ownerBytes is the owner file of a lock actor takes (no agent).
func ownerBytes(actor string) []byte {
	b, _ := json.Marshal(job.NewOwner(actor, ""))
	return append(b, '\n')
}

// ExpireStream removes the event stream's segments whose hour ended
// before cutoff (job.Spool.ExpireStream), oldest first.
func (s *Store) ExpireStream(cutoff time.Time) ([]string, error) {
	return s.sp.ExpireStream(cutoff)
}

// StreamSegments lists the event stream's segments, oldest first
// (job.Spool.StreamSegments).
func (s *Store) StreamSegments() ([]string, error) { return s.sp.StreamSegments() }

// OpenStreamSegment opens a segment of the event stream for reading
// (job.Spool.OpenStreamSegment: a regular file only).
func (s *Store) OpenStreamSegment(name string) (*os.File, error) {
	return s.sp.OpenStreamSegment(name)
}

// DurabilityErr is the failed fsync or syncfs of this process, if any
// (fsq.DurabilityErr): nothing written since can be promised durable.
func (s *Store) DurabilityErr() error { return fsq.DurabilityErr() }

// Swept is one leftover the sweep of tmp/ met: removed, or not (Err).
type Swept struct {
	Path    string
	ModTime time.Time
	// Note: an interrupted quarantine note of corrupt/ (else an entry
	// of tmp/).
	Note bool
	Err  error
}

// SweepTmp durably removes every entry of tmp/ older than maxAge
// (job.RemoveTmpLeftover; a symlink is judged and removed itself):
// submits that crashed before their final rename, and jobs whose removal
// by retention was cut short. A build whose submitter is still alive
// (stalled, or stopped, longer than maxAge) holds its flock and is left
// alone: fn is told with Err wrapping job.ErrBuilding, and its submit
// goes on when it wakes. Then the temp files of interrupted quarantine
// notes in corrupt/ as old (nothing else of corrupt/ is ever removed). fn
// is told of every removal, and of every one that failed or was left.
// The error is tmp/'s listing's; a ctx done stops the sweep (nil).
func (s *Store) SweepTmp(ctx context.Context, maxAge time.Duration, fn func(Swept)) error {
	dir := s.sp.Path(job.TmpDir)
	des, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("sweep tmp: %w", err)
	}
	cutoff := time.Now().Add(-maxAge)
	for _, de := range des {
		if ctx.Err() != nil {
			return nil
		}
		fi, err := de.Info() // lstat: a symlink is judged (and removed) itself
		if err != nil || fi.ModTime().After(cutoff) {
			continue
		}
		p := filepath.Join(dir, de.Name())
		fsq.CrashPoint("sweep/remove:before") // for test/crash; no-op in release builds
		fn(Swept{Path: p, ModTime: fi.ModTime(), Err: job.RemoveTmpLeftover(p)})
	}
	s.sweepQuarantineTemps(cutoff, fn)
	return nil
}

// quarantineTemp matches the temp file of an interrupted write of a
// quarantine note (".<name>.quarantine.json<digits>", see
// job.Spool.Quarantine): the one kind of temp file that no job's lock
// covers, for it sits in corrupt/ itself.
var quarantineTemp = regexp.MustCompile(`^\..+\.quarantine\.json-?[0-9]+$`)

// sweepQuarantineTemps removes the quarantine-note temp files in corrupt/
// older than cutoff. Nothing else in corrupt/ is ever removed.
func (s *Store) sweepQuarantineTemps(cutoff time.Time, fn func(Swept)) {
	dir := s.sp.Path(job.CorruptDir)
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		if !quarantineTemp.MatchString(de.Name()) {
			continue // no lstat for the quarantined entries themselves
		}
		fi, err := de.Info()
		if err != nil || !fi.Mode().IsRegular() || fi.ModTime().After(cutoff) {
			continue
		}
		p := filepath.Join(dir, de.Name())
		fn(Swept{Path: p, ModTime: fi.ModTime(), Note: true, Err: os.Remove(p)})
	}
}
