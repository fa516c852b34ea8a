package fetch

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
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
