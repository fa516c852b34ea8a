package fsq

import (
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
type Barrier struct {
	dir  string
	f    *os.File
	mu   sync.Mutex
	cond *sync.Cond
	// started counts the syncs begun, completed the syncs finished; a
	// sync's number is the value of started when it began.
	started, completed uint64
	running            bool
	errs               map[uint64]error // failed syncs, by number
	syncs              uint64           // syncfs calls made (for tests and metrics)
	waiting            int              // callers waiting for a sync to finish
	syncfs             func(fd int) error
}

// NewBarrier opens a barrier on the file system holding dir.
func NewBarrier(dir string) (*Barrier, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("barrier %s: %w", dir, classify(err))
	}
	b := &Barrier{dir: dir, f: f, errs: map[uint64]error{}, syncfs: unix.Syncfs}
	b.cond = sync.NewCond(&b.mu)
	return b, nil
}

// Wait makes every change made before the call durable: file contents,
// creates, renames and removes, anywhere on the file system.
func (b *Barrier) Wait() error {
	hook(OpBarrier, b.dir, "")
	record(RecBefore, b.dir, "", nil)
	b.mu.Lock()
	defer b.mu.Unlock()
	mine := b.started + 1 // the first sync to begin after this call
	for b.completed < mine {
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
		if err != nil {
			b.errs[n] = fmt.Errorf("syncfs %s: %w", b.dir, err)
		}
		b.cond.Broadcast()
	}
	if err := b.errs[mine]; err != nil {
		return err
	}
	record(RecSyncFS, b.dir, "", nil)
	return nil
}

// Syncs is the number of syncfs calls made so far.
func (b *Barrier) Syncs() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.syncs
}

// Close releases the barrier's directory handle.
func (b *Barrier) Close() error { return b.f.Close() }
