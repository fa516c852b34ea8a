package crawl

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// ErrBusy: a lock is held by another process.
var ErrBusy = errors.New("lock held by another process")

// Flock is an flock(2) lock on a file. The kernel releases it when its
// holder dies, however it dies, which is why long-held process locks of the
// crawl (the frontier's) and the short writer locks use it instead of the
// spool's mkdir locks: a SIGKILLed holder never leaves a lock that needs a
// liveness check and a takeover protocol. flock is local to the host, like
// the spool itself.
type Flock struct {
	f *os.File
}

func openLockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
}

// TryFlock takes an exclusive lock on path without waiting (ErrBusy when
// held).
func TryFlock(path string) (*Flock, error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrBusy)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Flock{f: f}, nil
}

// LockFile takes an exclusive (or, with shared, a shared) lock on path,
// waiting at most timeout (ErrBusy then).
func LockFile(path string, shared bool, timeout time.Duration) (*Flock, error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return &Flock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ErrBusy)
		}
		time.Sleep(wait)
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// SetContent replaces the lock file's content (who holds it), for
// operators; it is not part of the locking.
func (l *Flock) SetContent(b []byte) {
	if l == nil || l.f == nil {
		return
	}
	_ = l.f.Truncate(0)
	_, _ = l.f.WriteAt(b, 0)
}

// Unlock releases the lock.
func (l *Flock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}
