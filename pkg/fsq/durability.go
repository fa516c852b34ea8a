package fsq

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// A failed fsync is sticky for the whole process, as a failed syncfs is
// for its Barrier (fsyncgate): Linux reports a writeback error once and
// may drop the failed pages, so a later fsync of the same file can
// succeed with the data gone. After the first failure every durable step
// of this package (WriteFile, CreateFile, AppendLine, SyncDir, Rename,
// MkdirDurable, Barrier.Wait) fails with ErrDurability, and a daemon that
// sees DurabilityErr stops acknowledging and exits; its restart and
// recovery read the truth from disk.
var durability struct {
	mu  sync.Mutex
	err error
}

// syncFile fsyncs f; a variable so that tests can make it fail.
var syncFile = func(f *os.File) error { return f.Sync() }

// DurabilityErr is the first failed fsync or syncfs of this process,
// wrapping ErrDurability, or nil while every sync has succeeded.
func DurabilityErr() error {
	durability.mu.Lock()
	defer durability.mu.Unlock()
	return durability.err
}

// lostDurability records err, a failed sync of what, as the process's
// durability error (the first one stays) and returns it.
func lostDurability(what string, err error) error {
	durability.mu.Lock()
	defer durability.mu.Unlock()
	if durability.err == nil {
		if errors.Is(err, ErrDurability) {
			durability.err = err
		} else {
			durability.err = fmt.Errorf("%w: fsync %s: %w", ErrDurability, what, err)
		}
	}
	return durability.err
}

// syncChecked fsyncs f (named path), making a failure sticky.
func syncChecked(f *os.File, path string) error {
	if err := DurabilityErr(); err != nil {
		return err
	}
	if err := syncFile(f); err != nil {
		return lostDurability(path, err)
	}
	return nil
}
