package fsq

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Barrier is group commit for a file system: Wait returns once everything
// changed on it before Wait was called is durable. All the goroutines
// waiting at one moment share one syncfs(2), so N concurrent transactions
// pay for one flush instead of N rounds of fsyncs.
//
// A Wait that arrives while a sync is running does not trust that sync
// (it may have started before the caller's changes) and waits for the
// next one, which it shares with every other late arrival.
//
// A failed sync is sticky (fsyncgate): once a syncfs has failed, that
// Wait, every Wait waiting for the next sync and every later Wait return
// an error wrapping ErrDurability, and no sync is tried again. The kernel
// reports a writeback error once and may drop the failed pages, so a later
// sync that succeeds proves nothing about data written before it. The
// process must stop promising durability: restart, and let recovery read
// the truth from disk.
type Barrier struct {
	dir  string
	f    *os.File
	mu   sync.Mutex
	cond *sync.Cond
	// started counts the syncs begun, completed the syncs finished; a
	// sync's number is the value of started when it began.
	started, completed uint64
	running            bool
	failed             error  // the first failed sync: sticky
	injected           bool   // syncfs replaced by WithSyncFunc (tests)
	syncs              uint64 // syncfs calls made (for tests and metrics)
	waiting            int    // callers waiting for a sync to finish
	syncfs             func(fd int) error
}

// ErrDurability reports that a sync of the spool's file system failed:
// nothing written since the last good sync can be promised durable, now or
// later. A daemon that gets it stops acknowledging and exits.
var ErrDurability = errors.New("durability lost: a sync of the file system failed")

// BarrierOption configures NewBarrier.
type BarrierOption func(*Barrier)

// WithSyncFunc replaces syncfs(2) (given the descriptor of the barrier's
// directory), for tests that inject sync failures. A failure of an
// injected sync stays with its barrier; a failure of the real syncfs is
// also the whole process's (DurabilityErr).
func WithSyncFunc(f func(fd int) error) BarrierOption {
	return func(b *Barrier) { b.syncfs, b.injected = f, true }
}

// NewBarrier opens a barrier on the file system holding dir.
func NewBarrier(dir string, opts ...BarrierOption) (*Barrier, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("barrier %s: %w", dir, classify(err))
	}
	b := &Barrier{dir: dir, f: f, syncfs: unix.Syncfs}
	for _, o := range opts {
		o(b)
	}
	b.cond = sync.NewCond(&b.mu)
	return b, nil
}

// Wait makes every change made before the call durable: file contents,
// creates, renames and removes, anywhere on the file system.
func (b *Barrier) Wait() error {
	hook(OpBarrier, b.dir, "")
	record(RecBefore, b.dir, "", nil)
	if err := DurabilityErr(); err != nil && !b.injected {
		return err // an fsync of this process failed: nothing is durable
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	mine := b.started + 1 // the first sync to begin after this call
	for b.completed < mine {
		if b.failed != nil {
			// A sync failed while this caller's changes may have been
			// dirty: never trust a later one.
			return b.failed
		}
		if b.running {
			b.waiting++
			b.cond.Wait()
			b.waiting--
			continue
		}
		b.running = true
		b.started++
		n := b.started
		b.mu.Unlock()
		err := b.syncfs(int(b.f.Fd()))
		b.mu.Lock()
		b.running = false
		b.completed = n
		b.syncs++
		if err != nil && b.failed == nil {
			b.failed = fmt.Errorf("%w: syncfs %s: %w", ErrDurability, b.dir, err)
			if !b.injected {
				lostDurability(b.dir, b.failed)
			}
		}
		b.cond.Broadcast()
	}
	if b.failed != nil {
		return b.failed
	}
	record(RecSyncFS, b.dir, "", nil)
	return nil
}

// Generation returns the numbers of syncs begun and completed so far.
// Everything changed before a call to Generation is durable once
// completed reaches the started it returned plus one (the first sync to
// begin after the call), unless a sync failed.
func (b *Barrier) Generation() (started, completed uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed != nil {
		return b.started, 0 // nothing is promised any more
	}
	return b.started, b.completed
}

// Syncs is the number of syncfs calls made so far.
func (b *Barrier) Syncs() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.syncs
}

// Close releases the barrier's directory handle.
func (b *Barrier) Close() error { return b.f.Close() }
