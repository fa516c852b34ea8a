package fetch

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// maxGateWait bounds how long a fetch waits at its domain's gate (a
// Retry-After that another fetcher recorded); beyond it the fetch fails as
// a network failure and managerd's policy retries it later.
const maxGateWait = time.Minute

// errGateClosed: the domain asked for a longer rest than maxGateWait.
type errGateClosed struct{ until time.Time }

func (e errGateClosed) Error() string {
	return "domain rate-limited until " + e.until.UTC().Format(time.RFC3339)
}

// The gate of a domain is a file holding the earliest time the next
// request to the domain may start (unix nanoseconds), read and replaced
// under flock(2) by every fetcher of the crawl, in every agent process.
//
// The frontier already spaces its releases by the domain's interval; the
// gate is what makes the interval hold when agents claim released jobs
// late (a busy agent claims two jobs of one domain back to back), when a
// failed fetch is retried after a backoff shorter than the interval, and
// when a 429 or 503 with Retry-After reaches fetches already released.

func withGate(path string, fn func(next time.Time) (time.Time, bool)) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("gate %s: %w", path, err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
		return fmt.Errorf("gate %s: %w", path, err)
	}
	defer syscall.Flock(fd, syscall.LOCK_UN)
	var buf [8]byte
	var next time.Time
	if n, _ := f.ReadAt(buf[:], 0); n == 8 {
		next = time.Unix(0, int64(binary.BigEndian.Uint64(buf[:])))
	}
	nn, write := fn(next)
	if !write {
		return nil
	}
	binary.BigEndian.PutUint64(buf[:], uint64(nn.UnixNano()))
	if _, err := f.WriteAt(buf[:], 0); err != nil {
		return fmt.Errorf("gate %s: %w", path, err)
	}
	return nil
}

// passGate returns once a request to the gate's domain may start, still
// holding the gate's flock: other fetchers of the domain wait until the
// caller's request is written and release is called, which moves the gate
// to (time of release) + interval. Holding the gate until the request is
// on the wire is what spaces requests as the server sees them, even when a
// fetcher is descheduled between passing the gate and sending. release is
// idempotent; a path of "" yields a no-op.
func passGate(ctx context.Context, path string, interval time.Duration) (release func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
		if err != nil {
			return nil, fmt.Errorf("gate %s: %w", path, err)
		}
		fd := int(f.Fd())
		if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("gate %s: %w", path, err)
		}
		var buf [8]byte
		var next time.Time
		if n, _ := f.ReadAt(buf[:], 0); n == 8 {
			next = time.Unix(0, int64(binary.BigEndian.Uint64(buf[:])))
		}
		wait := time.Until(next)
		if wait > maxGateWait+interval && wait <= 24*time.Hour {
			_ = syscall.Flock(fd, syscall.LOCK_UN)
			f.Close()
			return nil, errGateClosed{next}
		}
		if wait <= 0 || wait > 24*time.Hour { // free, or a clock jump: ignore it
			var once sync.Once
			return func() {
				once.Do(func() {
					at := time.Now().Add(interval)
					if n, _ := f.ReadAt(buf[:], 0); n == 8 {
						if cur := time.Unix(0, int64(binary.BigEndian.Uint64(buf[:]))); cur.After(at) {
							at = cur
						}
					}
					binary.BigEndian.PutUint64(buf[:], uint64(at.UnixNano()))
					_, _ = f.WriteAt(buf[:], 0)
					_ = syscall.Flock(fd, syscall.LOCK_UN)
					f.Close()
				})
			}, nil
		}
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		f.Close()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// waitGate returns once a request to the gate's domain may start, having
// moved the gate to now + interval.
func waitGate(ctx context.Context, path string, interval time.Duration) error {
	for {
		var wait time.Duration
		var closed error
		err := withGate(path, func(next time.Time) (time.Time, bool) {
			now := time.Now()
			wait = next.Sub(now)
			switch {
			case wait > maxGateWait+interval:
				if wait <= 24*time.Hour {
					closed = errGateClosed{next}
					return next, false
				}
				// A time that far ahead is a clock jump: ignore it.
			case wait > 0:
				return next, false
			}
			wait = 0
			return now.Add(interval), true
		})
		if err != nil {
			return err
		}
		if closed != nil {
			return closed
		}
		if wait <= 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// pushGate moves the gate to at least t.
func pushGate(path string, t time.Time) {
	_ = withGate(path, func(next time.Time) (time.Time, bool) {
		if !next.Before(t) {
			return next, false
		}
		return t, true
	})
}
