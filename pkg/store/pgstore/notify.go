package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// waiter is WaitQueued's machinery: one connection per Store LISTENs on
// NotifyChannel (started by the first WaitQueued). A notification wakes
// one waiter, the one that has waited longest: every waiter of a Store is
// a slot of the same agent, and a job made queued is claimed by one of
// them, so waking them all would send a herd of claims of which all but
// one find nothing (on two cores, the herd delayed the one that mattered).
// A claim that filled its batch passes the wake-up on (wakeOne from
// Claim), so a burst still wakes as many slots as it has jobs for. When
// the connection is lost the waiter wakes them all (they poll: a wake-up
// is a hint, never a promise) and listens again.
type waiter struct {
	pool *pgxpool.Pool

	mu      sync.Mutex
	started bool
	ready   chan struct{}   // closed once LISTEN has been sent the first time
	queue   []chan struct{} // the waiting calls, oldest first; each closed when woken
	cancel  context.CancelFunc
	done    chan struct{}
}

func newWaiter(pool *pgxpool.Pool) *waiter {
	return &waiter{pool: pool, ready: make(chan struct{}), done: make(chan struct{})}
}

// WaitQueued waits until a job may have become queued (a notification on
// NotifyChannel from a submit, release or retry committed meanwhile) or
// timeout passes, whichever is first, and reports whether it was woken.
// It is the pickup hint of an agent, which claims after it returns either
// way: the timeout is the polling fallback, for a notification can be
// missed (the listening connection cut, or a notification sent before
// this call). ctx's end returns its error.
func (s *Store) WaitQueued(ctx context.Context, timeout time.Duration) (bool, error) {
	w := s.wait
	w.mu.Lock()
	if !w.started {
		w.started = true
		lctx, cancel := context.WithCancel(context.Background())
		w.cancel = cancel
		go w.listen(lctx)
	}
	ready := w.ready
	w.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
	wake := make(chan struct{})
	w.mu.Lock()
	w.queue = append(w.queue, wake) // listening now: wait for the next notification
	w.mu.Unlock()
	select {
	case <-wake:
		return true, nil
	case <-t.C:
	case <-ctx.Done():
	}
	if !w.leave(wake) {
		// Woken as it gave up: the wake-up is passed on, not lost.
		w.wakeOne()
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return false, nil
}

// leave takes a waiter that gave up out of the queue; false when it was
// woken meanwhile (no longer queued).
func (w *waiter) leave(wake chan struct{}) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, c := range w.queue {
		if c == wake {
			w.queue = append(w.queue[:i], w.queue[i+1:]...)
			return true
		}
	}
	return false
}

// wakeOne wakes the waiter that has waited longest, if any.
func (w *waiter) wakeOne() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) > 0 {
		close(w.queue[0])
		w.queue = w.queue[1:]
	}
}

// wakeAll wakes every waiter.
func (w *waiter) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.queue {
		close(c)
	}
	w.queue = nil
}

// listen holds one connection that LISTENs, until ctx ends.
func (w *waiter) listen(ctx context.Context) {
	defer close(w.done)
	readyOnce := sync.OnceFunc(func() { close(w.ready) })
	defer readyOnce()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		conn, err := w.pool.Acquire(ctx)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN "+NotifyChannel)
			if err == nil {
				readyOnce()
				backoff = 50 * time.Millisecond
				for err == nil {
					_, err = conn.Conn().WaitForNotification(ctx)
					if err == nil {
						w.wakeOne()
					}
				}
			}
			// A connection that failed is not given back to the pool.
			_ = conn.Conn().Close(context.Background())
			conn.Release()
		}
		if ctx.Err() != nil {
			return
		}
		w.wakeAll() // notifications may have been missed: let waiters poll
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// close stops the listener and waits for it.
func (w *waiter) close() {
	w.mu.Lock()
	started, cancel := w.started, w.cancel
	w.mu.Unlock()
	if started {
		cancel()
		<-w.done
	}
}

// waiters is how many WaitQueued calls are waiting for a notification.
func (w *waiter) waiters() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}
