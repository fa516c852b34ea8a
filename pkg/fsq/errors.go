package fsq

import (
	"errors"
	"io/fs"
	"syscall"
)

var (
	// ErrVanished reports a lost race: the source of a rename (or the
	// directory a write targets) no longer exists, so another process owns
	// the object now. Callers abort the step and never recreate anything.
	ErrVanished = errors.New("source vanished (lost race)")
	// ErrExists reports that the destination of a rename or a lock already
	// exists.
	ErrExists = errors.New("destination exists")
	// ErrLocked reports that a lock directory is already held.
	ErrLocked = errors.New("already locked")
	// ErrSymlink reports a symlink found where a real file or directory
	// must be: the spool never follows links.
	ErrSymlink = errors.New("symlink refused")
)

// classify maps the errno of a failed rename to the package's sentinels,
// keeping the original error in the chain.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return &wrapped{sentinel: ErrVanished, err: err}
	case errors.Is(err, fs.ErrExist), errors.Is(err, syscall.ENOTEMPTY):
		return &wrapped{sentinel: ErrExists, err: err}
	}
	return err
}

type wrapped struct {
	sentinel error
	err      error
}

func (w *wrapped) Error() string   { return w.err.Error() }
func (w *wrapped) Unwrap() []error { return []error{w.sentinel, w.err} }
