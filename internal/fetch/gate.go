package fetch

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
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
// request to the domain may start (unix nanoseconds, 8 bytes big endian)
// and a ninth byte, 1 while a fetcher that passed the gate has not yet
// sent its request. It is read and replaced under flock(2) by every
// fetcher of the crawl, in every agent process.
//
// The frontier already spaces its releases by the domain's interval; the
// gate is what makes the interval hold when agents claim released jobs
// late (a busy agent claims two jobs of one domain back to back), when a
// failed fetch is retried after a backoff shorter than the interval, and
// when a 429 or 503 with Retry-After reaches fetches already released.
//
// Passing the gate and sending the request are one step for the other
// fetchers: with a positive interval, a fetcher that passes keeps the
// gate's flock until its request's bytes have been written to the socket
// (sendConn.Write), and only then sets the gate to that time plus the
// interval. Recording "now + interval" at the pass and letting go of the
// lock is not enough: a fetcher descheduled (or slow to dial) between
// the pass and its write sends whenever it gets the CPU back, and another
// fetcher of the domain that passed the gate an interval after the first
// one's pass sends right next to it. (httptrace's WroteRequest is not the
// moment of the write either: net/http calls it when the request is in
// the connection's buffer, before the flush.)
//
// A fetcher killed while holding the lock leaves the ninth byte at 1: its
// request may have gone out at any moment until the kernel dropped the
// lock, so the next fetcher counts the interval from when it gets the
// lock.

const (
	gateIdle    = 0
	gateSending = 1
)

// gateLockPoll bounds the wait between two attempts at a busy gate lock:
// waiting fetchers poll (LOCK_NB) so that a stopped job stops waiting.
const gateLockPoll = 5 * time.Millisecond

// lockGate opens and flocks the gate file, polling until ctx is done.
func lockGate(ctx context.Context, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("gate %s: %w", path, err)
	}
	fd := int(f.Fd())
	pause := 200 * time.Microsecond
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("gate %s: %w", path, err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
		pause = min(2*pause, gateLockPoll)
	}
}

func readGate(f *os.File) (next time.Time, state byte) {
	var buf [9]byte
	n, _ := f.ReadAt(buf[:], 0)
	if n >= 8 {
		next = time.Unix(0, int64(binary.BigEndian.Uint64(buf[:8])))
	}
	if n == 9 {
		state = buf[8]
	}
	return next, state
}

func writeGate(f *os.File, next time.Time, state byte) error {
	var buf [9]byte
	binary.BigEndian.PutUint64(buf[:8], uint64(next.UnixNano()))
	buf[8] = state
	_, err := f.WriteAt(buf[:], 0)
	return err
}

func unlockGate(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}

// gateTicket is a fetcher's passage through its domain's gate. While it
// is open the fetcher holds the gate's lock; sent (the request is on the
// wire) or release (it was not sent) closes it. A nil ticket (no interval
// to keep) does nothing.
type gateTicket struct {
	mu       sync.Mutex
	f        *os.File
	interval time.Duration
}

// sent closes the ticket: the request was written at t, the next one may
// start at t + interval.
func (tk *gateTicket) sent(t time.Time) { tk.close(t) }

// release closes the ticket if it is still open (the request was not
// written, or not seen to be): the next request may start an interval
// from now, in case a write went unseen.
func (tk *gateTicket) release() { tk.close(time.Now()) }

func (tk *gateTicket) close(t time.Time) {
	if tk == nil {
		return
	}
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.f == nil {
		return
	}
	next, _ := readGate(tk.f)
	if n := t.Add(tk.interval); n.After(next) {
		next = n
	}
	_ = writeGate(tk.f, next, gateIdle)
	unlockGate(tk.f)
	tk.f = nil
}

// afterGateHook, when set (tests), runs after a fetcher passed its gate
// and before it sends: a stand-in for being descheduled there.
var afterGateHook func()

// passGate returns once a request to the gate's domain may start. With a
// positive interval the returned ticket holds the gate until the request
// has been written (arm the connection with it, see sendConn) or the
// ticket is released; the caller must release it in any case.
func passGate(ctx context.Context, path string, interval time.Duration) (*gateTicket, error) {
	for {
		f, err := lockGate(ctx, path)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		next, state := readGate(f)
		if state == gateSending {
			// Its holder died before saying whether it sent: it may
			// have, at any time until now.
			if n := now.Add(interval); n.After(next) {
				next = n
			}
			if err := writeGate(f, next, gateIdle); err != nil {
				unlockGate(f)
				return nil, fmt.Errorf("gate %s: %w", path, err)
			}
		}
		wait := next.Sub(now)
		if wait > maxGateWait+interval && wait <= 24*time.Hour {
			unlockGate(f)
			return nil, errGateClosed{next}
		}
		// A time more than a day ahead is a clock jump: ignore it.
		if wait > 0 && wait <= 24*time.Hour {
			unlockGate(f)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, context.Cause(ctx)
			case <-t.C:
			}
			continue
		}
		if interval <= 0 {
			// Nothing to space: only a pushed gate (Retry-After) holds.
			unlockGate(f)
			if afterGateHook != nil {
				afterGateHook()
			}
			return nil, nil
		}
		if err := writeGate(f, now.Add(interval), gateSending); err != nil {
			unlockGate(f)
			return nil, fmt.Errorf("gate %s: %w", path, err)
		}
		if afterGateHook != nil {
			afterGateHook()
		}
		return &gateTicket{f: f, interval: interval}, nil
	}
}

// pushGate moves the gate to at least t.
func pushGate(path string, t time.Time) {
	f, err := lockGate(context.Background(), path)
	if err != nil {
		return
	}
	defer unlockGate(f)
	next, _ := readGate(f)
	if !next.Before(t) {
		return
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(t.UnixNano()))
	_, _ = f.WriteAt(buf[:], 0) // the state byte is left as it is
}

// sendConn is every connection the fetch clients dial. When armed with a
// gate ticket (httptrace GotConn: the connection now carries that
// request), its first successful write closes the ticket: the request's
// first bytes are in the kernel, the moment the gate spaces requests from.
// (Over HTTP/2 a connection is shared: another stream's write may close
// the ticket a little early. When net/http retries a GET on a new
// connection after a reused one failed, the retry is armed again by its
// GotConn, but the ticket is already closed if the first write got out.)
type sendConn struct {
	net.Conn
	armed atomic.Pointer[gateTicket]
}

func (c *sendConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		if tk := c.armed.Swap(nil); tk != nil {
			tk.sent(time.Now())
		}
	}
	return n, err
}

// armConn arms the sendConn under conn (a TLS connection's too) with tk.
func armConn(conn net.Conn, tk *gateTicket) {
	if tk == nil {
		return
	}
	for conn != nil {
		if sc, ok := conn.(*sendConn); ok {
			sc.armed.Store(tk)
			return
		}
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		conn = u.NetConn()
	}
}
