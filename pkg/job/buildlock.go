package job

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/farro-dev/farro/pkg/fsq"
)

// A submit's build directory in tmp/ is flocked (LOCK_EX) by its submitter
// from just after its mkdir until the submit returns; whoever removes tmp/
// leftovers (managerd's sweep, farroctl fsck --repair) removes an entry
// only once it holds that flock itself. The kernel drops an flock with its
// last descriptor, so a submitter that is alive, even stopped for hours,
// keeps its build, and one that was SIGKILLed or lost to a power cut
// leaves an entry that the next sweep of its age takes. The flock is on
// the directory itself, not on a file in it, so that nothing extra is
// created and renamed into the job's directory.

// ErrBuilding reports a tmp/ entry that a live submit is still building:
// its submitter holds the entry's flock. It is left alone.
var ErrBuilding = errors.New("a live submit is still building it")

// errSwept reports that a new build directory was removed before its
// submitter took its flock (the submitter stalled between the mkdir and
// the flock for longer than the sweep's age): the build starts again in a
// new directory.
var errSwept = errors.New("build directory swept before it was locked")

// openDir opens path for an flock: a directory only, never through a
// symlink, never blocking (O_NONBLOCK, should a FIFO be there). A raw
// descriptor, not an *os.File: os.NewFile would try to register it with
// the runtime's poller, syscalls the submit path need not pay.
func openDir(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// lockBuild takes the flock of the build directory path that this process
// has just made and returns the descriptor that holds it (closing it
// releases the flock). errSwept: path was removed, or is being removed, by
// a sweep.
func lockBuild(path string) (int, error) {
	fd, err := openDir(path)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, fmt.Errorf("%w (%w)", errSwept, err)
	}
	if err != nil {
		return -1, err
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) { // a sweeper holds it: removing it
			return -1, errSwept
		}
		return -1, fmt.Errorf("flock %s: %w", path, err)
	}
	return fd, nil
}

// IsLiveBuild reports whether the tmp/ entry at path is a build directory
// whose submitter is alive (it holds the entry's flock). It only probes:
// for a removal use RemoveTmpLeftover, which holds the flock while it
// removes.
func IsLiveBuild(path string) bool {
	fd, err := openDir(path)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return errors.Is(unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
}

// RemoveTmpLeftover durably removes the tmp/ entry at path (fsq.RemoveAll)
// unless a live submit is building it (ErrBuilding). The caller judges its
// age. A directory is removed while this call holds its flock, so that a
// submitter that made it and stalled before locking it sees its build
// removed rather than half-removed, and two sweepers never remove the same
// entry at once. Anything that is not a directory (a file, a FIFO, a
// symlink: never followed) is no build and is removed as it is; a missing
// path is not an error.
func RemoveTmpLeftover(path string) error {
	fd, err := openDir(path)
	switch {
	case err == nil:
		defer unix.Close(fd) // after the removal: drops the flock
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			if errors.Is(err, unix.EWOULDBLOCK) {
				return fmt.Errorf("tmp leftover %s: %w", path, ErrBuilding)
			}
			return fmt.Errorf("tmp leftover %s: flock: %w", path, err)
		}
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		// Not a directory: no build. Removed as before.
	case errors.Is(err, unix.EACCES):
		// A directory this process may not read (a planted one, or another
		// user's): removed as before, which works only if it is empty. A
		// build is empty only before its files are written; a submitter
		// that finds its build gone then starts it again (see errSwept).
	default:
		// EMFILE and the like: a build may be live; leave it to a later pass.
		return fmt.Errorf("tmp leftover: %w", err)
	}
	return fsq.RemoveAll(path)
}
