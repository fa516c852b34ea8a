// Package politeness is the one gate every request to a domain passes,
// whoever makes it: a crawl's fetches, robots.txt and sitemap fetches and
// each of their redirect hops, net/http's transparent retries, source
// checks and their robots.txt fetches, refresh rounds. It lives in the
// spool (<spool>/politeness/), one record per domain, so that all crawls,
// all checks and all agent processes share it.
//
// A request to a domain:
//
//	turn, err := gates.Wait(ctx, domain, politeness.Ask{Interval: 2 * time.Second, MaxInFlight: 1})
//	... write the request; on its first bytes on the wire: turn.Sent(time.Now())
//	... read the answer; a retry of the same request: turn.Resend(ctx)
//	turn.Done()
//
// Wait returns when the request may start: an interval has passed since
// the previous request to the domain (the larger of the interval that
// request asked and the one this request asks), the domain is not held
// (HoldUntil: a Retry-After), and fewer requests than MaxInFlight are
// under way. Between Wait and Sent the turn holds the domain's record
// locked, so that passing the gate and sending are one step for the
// others: a holder descheduled after Wait does not let another request
// pass an interval after its pass and land next to its own.
//
// The record is a small file (<domain>) read and written under flock(2);
// the requests under way are flock(2)s on slot files (<domain>@<k>), one
// per request. The kernel drops both when their holder dies, however it
// dies: a SIGKILLed holder never leaves the domain blocked. A holder that
// died between Wait and Sent may have sent at any moment until then, so
// the next request waits an interval from when it finds the record.
package politeness

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// Dir is the directory of the gates, relative to the spool.
const Dir = "politeness"

// MaxHold bounds a hold (Retry-After) and so any wait for one: a longer
// rest is the caller's to schedule (the frontier's cooldowns).
const MaxHold = time.Minute

// MaxSlots bounds MaxInFlight: the requests under way to one domain.
const MaxSlots = 64

// Ask is what a request asks of its domain's gate.
type Ask struct {
	// Interval: no request to the domain closer than this before or
	// after this one. 0: none of its own (the others' still hold).
	Interval time.Duration
	// MaxInFlight: this request starts only while fewer than this many
	// requests to the domain, by anyone, are under way. 0: no cap of its
	// own.
	MaxInFlight int
}

// Gates is the set of gates in one directory (the spool's Dir).
type Gates struct {
	dir string
	// poll bounds the wait between two looks at a busy gate.
	poll time.Duration
	// maxHold is MaxHold (tests shorten it).
	maxHold time.Duration
	// OnBadFile, when set, is told of every file found at a gate's path
	// that was not a gate, moved aside or not (for the daemon's log).
	OnBadFile func(*BadFileError)
}

// Open returns the gates of the spool at root.
func Open(root string) *Gates { return At(filepath.Join(root, Dir)) }

// At returns the gates kept in dir.
func At(dir string) *Gates { return &Gates{dir: dir, poll: 5 * time.Millisecond, maxHold: MaxHold} }

// Path is the file of domain's record.
func (g *Gates) Path(domain string) string { return filepath.Join(g.dir, FileName(domain)) }

func (g *Gates) slotPath(domain string, k int) string {
	return g.Path(domain) + "@" + strconv.Itoa(k)
}

// FileName is domain's file name: lower-case letters, digits, '-', '_'
// and inner dots as they are, every other byte %XX (so that '@', which
// separates a slot's number, and '/' never appear, nor a leading dot).
func FileName(domain string) string {
	b := make([]byte, 0, len(domain)+2)
	for i := 0; i < len(domain); i++ {
		c := domain[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.' && i > 0:
			b = append(b, c)
		default:
			b = append(b, '%', "0123456789ABCDEF"[c>>4], "0123456789ABCDEF"[c&15])
		}
	}
	if len(b) == 0 {
		return "%"
	}
	return string(b)
}

// The record: magic, the time of the last request (sent, or passed when
// it asked no interval), the earliest time the next may start by that
// request's interval, the hold, the state, the number of slot files.
const (
	recMagic = "FPG1"
	recSize  = 32
	idle     = 0
	sending  = 1 // a holder passed and has not said it sent
)

type record struct {
	last, next, hold time.Time
	state            byte
	slots            int
}

func (r *record) encode() []byte {
	b := make([]byte, recSize)
	copy(b, recMagic)
	put := func(off int, t time.Time) {
		if !t.IsZero() {
			binary.BigEndian.PutUint64(b[off:], uint64(t.UnixNano()))
		}
	}
	put(4, r.last)
	put(12, r.next)
	put(20, r.hold)
	b[28], b[29] = r.state, byte(r.slots)
	return b
}

func decode(b []byte) (record, bool) {
	var r record
	if len(b) == 0 {
		return r, true // a new gate
	}
	if len(b) != recSize || string(b[:4]) != recMagic || b[28] > sending || int(b[29]) > MaxSlots {
		return r, false
	}
	get := func(off int) time.Time {
		if n := int64(binary.BigEndian.Uint64(b[off:])); n != 0 {
			return time.Unix(0, n)
		}
		return time.Time{}
	}
	r.last, r.next, r.hold = get(4), get(12), get(20)
	r.state, r.slots = b[28], int(b[29])
	return r, true
}

// BadFileError: what was at a gate's path was not a gate (a FIFO, a
// directory, a symlink, a file of another size or content). It has been
// moved aside to Moved ("" if it could not be) and a new gate made.
type BadFileError struct {
	Path, Moved string
	Why         string
}

func (e *BadFileError) Error() string {
	if e.Moved == "" {
		return fmt.Sprintf("politeness gate %s: %s", e.Path, e.Why)
	}
	return fmt.Sprintf("politeness gate %s: %s (moved to %s)", e.Path, e.Why, filepath.Base(e.Moved))
}

// quarantine moves what is at path aside (path@bad-<ns>: '@' never
// appears in a domain's file name) and reports it.
func quarantine(path, why string) *BadFileError {
	e := &BadFileError{Path: path, Why: why}
	aside := path + "@bad-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := os.Rename(path, aside); err == nil {
		e.Moved = aside
		_ = fsq.SyncDir(filepath.Dir(path))
	}
	return e
}

func (g *Gates) reportBad(e *BadFileError) {
	if g.OnBadFile != nil {
		g.OnBadFile(e)
	}
}

// openRegular opens path for reading and writing, creating it, without
// following a symlink or blocking on a FIFO, and only if it is a regular
// file; anything else is moved aside and a new file made (once).
func (g *Gates) openRegular(path string, create bool) (*os.File, error) {
	for try := 0; ; try++ {
		flags := os.O_RDWR | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC
		if create {
			flags |= os.O_CREATE
		}
		f, err := os.OpenFile(path, flags, 0o644)
		var why string
		switch {
		case err == nil:
			fi, serr := f.Stat()
			if serr != nil {
				f.Close()
				return nil, fmt.Errorf("politeness gate %s: %w", path, serr)
			}
			if fi.Mode().IsRegular() {
				return f, nil
			}
			f.Close()
			why = "not a regular file (" + fi.Mode().Type().String() + ")"
		case errors.Is(err, os.ErrNotExist):
			return nil, err
		case errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENXIO),
			errors.Is(err, syscall.EMLINK):
			why = "not a regular file: " + err.Error()
		default:
			return nil, fmt.Errorf("politeness gate %s: %w", path, err)
		}
		e := quarantine(path, why)
		g.reportBad(e)
		if e.Moved == "" || try > 0 {
			return nil, e
		}
	}
}

// lockRecord opens and flocks domain's record, polling until ctx is done,
// and reads it. A record that is not one is moved aside.
func (g *Gates) lockRecord(ctx context.Context, domain string) (*os.File, record, error) {
	path := g.Path(domain)
	if err := fsq.MkdirDurable(g.dir); err != nil {
		return nil, record{}, fmt.Errorf("politeness gates %s: %w", g.dir, err)
	}
	pause := 200 * time.Microsecond
	for {
		f, err := g.openRegular(path, true)
		if err != nil {
			return nil, record{}, err
		}
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err != syscall.EINTR {
				break
			}
		}
		if err != nil && err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, record{}, fmt.Errorf("politeness gate %s: %w", path, err)
		}
		if err == nil {
			// The file may have been moved aside (quarantined) between
			// the open and the lock: lock what is at the path.
			if same(f, path) {
				var buf [recSize + 1]byte
				n, rerr := f.ReadAt(buf[:], 0)
				if rerr != nil && n == 0 && !errors.Is(rerr, io.EOF) {
					unlock(f)
					return nil, record{}, fmt.Errorf("politeness gate %s: %w", path, rerr)
				}
				if r, ok := decode(buf[:n]); ok {
					return f, r, nil
				}
				e := quarantine(path, fmt.Sprintf("not a gate record (%d bytes or more)", n))
				g.reportBad(e)
				unlock(f)
				if e.Moved == "" {
					return nil, record{}, e
				}
				continue
			}
			unlock(f)
			continue
		}
		f.Close()
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, record{}, context.Cause(ctx)
		case <-t.C:
		}
		pause = min(2*pause, g.poll)
	}
}

func same(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

func unlock(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}

func writeRecord(f *os.File, r *record) error {
	_, err := f.WriteAt(r.encode(), 0)
	return err
}

// Turn is one request's passage through its domain's gate: from Wait
// until Sent it holds the domain's record; until Done, its slot (if it
// asked for a cap).
type Turn struct {
	g      *Gates
	domain string
	ask    Ask
	mu     sync.Mutex
	rec    *os.File // held from Wait (or Resend) until Sent
	slot   *os.File // held from Wait until Done
}

// Wait returns when a request to domain may start (see the package
// comment), or with ctx's cause. The caller must call Done.
func (g *Gates) Wait(ctx context.Context, domain string, ask Ask) (*Turn, error) {
	ask.MaxInFlight = min(max(ask.MaxInFlight, 0), MaxSlots)
	tn := &Turn{g: g, domain: domain, ask: ask}
	if err := tn.pass(ctx, true); err != nil {
		return nil, err
	}
	return tn, nil
}

// Resend waits again, keeping the turn's slot: the same request goes out
// once more (net/http retries it on a new connection, a redirect hop
// stays on the domain). Call Sent again when it is written.
func (tn *Turn) Resend(ctx context.Context) error {
	tn.mu.Lock()
	held := tn.rec != nil
	tn.mu.Unlock()
	if held {
		return nil // not sent yet: still holding the gate
	}
	return tn.pass(ctx, false)
}

// stepWatch remembers when a record's "last" was first seen in the
// future (the clock stepped back since it was written): it then counts
// as sent at that moment, so that a step back never stalls the domain
// for more than an interval.
type stepWatch struct {
	last, seen time.Time
}

func (s *stepWatch) since(last, now time.Time) time.Duration {
	if d := now.Sub(last); d >= 0 {
		return d
	}
	if !s.last.Equal(last) {
		s.last, s.seen = last, now
	}
	return now.Sub(s.seen)
}

func (tn *Turn) pass(ctx context.Context, takeSlot bool) error {
	g := tn.g
	var sw, hw stepWatch
	for {
		f, r, err := g.lockRecord(ctx, tn.domain)
		if err != nil {
			return err
		}
		now := time.Now()
		if r.state == sending {
			// Its holder died before saying whether it sent: it may
			// have, at any time until now.
			gap := max(r.next.Sub(r.last), 0)
			r.last, r.next, r.state = now, now.Add(gap), idle
			if err := writeRecord(f, &r); err != nil {
				unlock(f)
				return fmt.Errorf("politeness gate %s: %w", g.Path(tn.domain), err)
			}
		}
		wait := time.Duration(0)
		if !r.last.IsZero() {
			gap := max(r.next.Sub(r.last), tn.ask.Interval)
			wait = gap - sw.since(r.last, now)
		}
		if !r.hold.IsZero() {
			// A hold ends at most MaxHold after it is first seen.
			if hwait := g.maxHold - hw.since(r.hold.Add(-g.maxHold), now); hwait > wait {
				wait = hwait
			}
		}
		if wait > 0 {
			unlock(f)
			if err := sleep(ctx, wait); err != nil {
				return err
			}
			continue
		}
		if takeSlot && tn.ask.MaxInFlight > 0 {
			slot, grew, err := g.takeSlot(tn.domain, tn.ask.MaxInFlight, r.slots)
			if err != nil {
				unlock(f)
				return err
			}
			if slot == nil {
				unlock(f)
				if err := sleep(ctx, g.poll); err != nil {
					return err
				}
				continue
			}
			tn.slot = slot
			r.slots = max(r.slots, grew)
		}
		if tn.ask.Interval <= 0 {
			// Nothing of its own to space: the pass is the request.
			r.last, r.next = now, now
			err := writeRecord(f, &r)
			unlock(f)
			if err != nil {
				tn.Done()
				return fmt.Errorf("politeness gate %s: %w", g.Path(tn.domain), err)
			}
			return nil
		}
		r.last, r.next, r.state = now, now.Add(tn.ask.Interval), sending
		if err := writeRecord(f, &r); err != nil {
			unlock(f)
			tn.Done()
			return fmt.Errorf("politeness gate %s: %w", g.Path(tn.domain), err)
		}
		tn.mu.Lock()
		tn.rec = f
		tn.mu.Unlock()
		return nil
	}
}

// takeSlot takes a free slot if fewer than limit of the domain's slots
// (known: the record's count) are held; it returns nil when none may be
// taken now, and the number of slot files there now are.
func (g *Gates) takeSlot(domain string, limit, known int) (*os.File, int, error) {
	n := max(known, limit)
	busy := 0
	var mine *os.File
	for k := 0; k < n; k++ {
		if mine != nil && known <= limit {
			break // nobody counts more slots than this turn's cap
		}
		f, err := g.openRegular(g.slotPath(domain, k), true)
		if err != nil {
			if mine != nil {
				mine.Close()
			}
			return nil, 0, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			busy++
			continue
		}
		if mine == nil && k < limit {
			mine = f
			continue
		}
		unlock(f) // a free slot beyond this turn's cap, or a second one
	}
	if mine == nil || busy >= limit {
		if mine != nil {
			unlock(mine)
		}
		return nil, n, nil
	}
	return mine, n, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Sent tells the gate the request was written at t: the next request may
// start an interval later. Only the first Sent after Wait or Resend
// counts.
func (tn *Turn) Sent(t time.Time) {
	if tn == nil {
		return
	}
	tn.mu.Lock()
	defer tn.mu.Unlock()
	f := tn.rec
	if f == nil {
		return
	}
	tn.rec = nil
	var buf [recSize]byte
	n, _ := f.ReadAt(buf[:], 0)
	r, ok := decode(buf[:n])
	if !ok {
		r = record{}
	}
	r.last, r.next, r.state = t, t.Add(tn.ask.Interval), idle
	_ = writeRecord(f, &r) // lost: the next pass finds "sending" gone wrong at worst one interval late
	unlock(f)
}

// Done ends the turn: a request not seen to be sent counts as sent now
// (it may have been), and its slot is free.
func (tn *Turn) Done() {
	if tn == nil {
		return
	}
	tn.Sent(time.Now())
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if tn.slot != nil {
		unlock(tn.slot)
		tn.slot = nil
	}
}

// HoldUntil keeps every request to domain back until t (at most MaxHold
// from now): a Retry-After, a Crawl-delay learnt after a request went out
// with a shorter interval.
func (g *Gates) HoldUntil(domain string, t time.Time) error {
	if lim := time.Now().Add(g.maxHold); t.After(lim) {
		t = lim
	}
	ctx, cancel := context.WithTimeout(context.Background(), MaxHold)
	defer cancel()
	f, r, err := g.lockRecord(ctx, domain)
	if err != nil {
		return err
	}
	defer unlock(f)
	if !r.hold.Before(t) {
		return nil
	}
	r.hold = t
	if err := writeRecord(f, &r); err != nil {
		return fmt.Errorf("politeness gate %s: %w", g.Path(domain), err)
	}
	return nil
}
