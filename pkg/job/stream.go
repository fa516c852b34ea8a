package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// The spool-wide event stream: events/<UTC hour>.jsonl, one JSON object a
// line, with the field names of the daemons' log lines (internal/logx).
// Every transition of every job is appended by the process that makes it,
// and farroctl appends one audit line per action. It is a copy for
// shipping and following; a job's own events.jsonl stays the authority.
const (
	// StreamDir is the stream's directory below the spool root.
	StreamDir = "events"
	// StreamApp is the app field of every stream line (logx.App).
	StreamApp = "farro"
	// StreamSegmentLayout names a segment by the UTC hour of its lines:
	// events/2026-11-24T14.jsonl. Names sort in time order.
	StreamSegmentLayout = "2006-01-02T15"
	// StreamSegmentExt ends every segment's name.
	StreamSegmentExt = ".jsonl"
	// MaxStreamLine bounds a stream line (newline included): well below
	// 4 KiB, so that one write(2) with O_APPEND is never interleaved with
	// another process's line. Long reasons and job lists are truncated.
	MaxStreamLine = 3 << 10
	// StreamTimeLayout is the timestamp format of logx's lines.
	StreamTimeLayout = "2006-01-02T15:04:05.000Z07:00"
)

// The event types of the stream (event.type).
const (
	StreamTransition = "state_transition" // a job changed state (logx.Transition's type)
	StreamRemoved    = "removed"          // a terminal job was deleted (rm, retention)
	StreamOperator   = "operator"         // an operator's action (farroctl), see Audit
)

// Caps of the variable fields of a stream line.
const (
	maxStreamReason = 1024
	maxStreamActor  = 128
	maxStreamIDs    = 16 // job_ids listed in one audit line; count has them all
)

// StreamEvent is the event object of a stream line.
type StreamEvent struct {
	Type    string `json:"type"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Command string `json:"command,omitempty"` // operator lines: the farroctl command
}

// StreamLine is one line of the stream. Transition lines carry the keys of
// logx.Transition; operator lines add the OS user and the command's jobs.
type StreamLine struct {
	Timestamp     string      `json:"timestamp"`
	Level         string      `json:"level"`
	App           string      `json:"app"`
	Actor         string      `json:"actor"`
	JobID         string      `json:"job_id,omitempty"`
	CorrelationID string      `json:"correlation_id,omitempty"`
	Kind          string      `json:"kind,omitempty"`
	Reason        string      `json:"reason,omitempty"`
	Attempt       *int        `json:"attempt,omitempty"`
	Event         StreamEvent `json:"event"`
	User          string      `json:"user,omitempty"`
	UID           *int        `json:"uid,omitempty"`
	JobIDs        []string    `json:"job_ids,omitempty"`
	Count         int         `json:"count,omitempty"`
	Failed        int         `json:"failed,omitempty"`
	Truncated     bool        `json:"job_ids_truncated,omitempty"`
	Target        string      `json:"target,omitempty"`
	Message       string      `json:"message"`
}

// Has reports whether the line is about job id (its job_id or one of its
// job_ids).
func (l *StreamLine) Has(id string) bool {
	if l.JobID == id {
		return true
	}
	for _, x := range l.JobIDs {
		if x == id {
			return true
		}
	}
	return false
}

// Time parses the line's timestamp (zero if it does not parse).
func (l *StreamLine) Time() time.Time {
	t, _ := time.Parse(StreamTimeLayout, l.Timestamp)
	return t
}

// StreamSegment is the segment name of the hour of t.
func StreamSegment(t time.Time) string {
	return t.UTC().Format(StreamSegmentLayout) + StreamSegmentExt
}

// ParseStreamSegment returns the hour a segment name stands for; ok is
// false for any other name.
func ParseStreamSegment(name string) (time.Time, bool) {
	base, found := strings.CutSuffix(name, StreamSegmentExt)
	if !found {
		return time.Time{}, false
	}
	t, err := time.Parse(StreamSegmentLayout, base)
	if err != nil || t.Format(StreamSegmentLayout) != base {
		return time.Time{}, false
	}
	return t, true
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// WithStreamWarn makes the spool call warn when a stream line could not
// be written: at the first failure, then at most once a minute, with the
// number of lines lost so far. The transition itself is never affected.
func WithStreamWarn(warn func(err error, failures uint64)) Option {
	return func(s *Spool) { s.stream.warn = warn }
}

// StreamFailures is how many stream lines this Spool could not write.
func (s *Spool) StreamFailures() uint64 { return s.stream.failures.Load() }

// streamRetryOpen is how long a segment that could not be opened (a
// hostile entry in its place, a full inode table) is left alone before the
// next open: a transition never pays for an open that failed just before.
const streamRetryOpen = 5 * time.Second

// stream is a Spool's writer of the event stream: the current segment's
// descriptor, opened once an hour (O_APPEND|O_CREAT, never fsynced: the
// transactions' barriers make the lines durable). Writers take mu for
// reading; only reopening takes it for writing.
type stream struct {
	mu       sync.RWMutex
	fd       int // the open segment, when open
	open     bool
	hour     time.Time // the hour fd's segment is for
	failedAt time.Time // last failed open, for streamRetryOpen
	failErr  error

	failures atomic.Uint64
	warnMu   sync.Mutex
	warnedAt time.Time
	warn     func(error, uint64)
	now      func() time.Time // tests move the clock across hours
}

func (w *stream) clock() time.Time {
	if w.now != nil {
		return w.now().UTC()
	}
	return time.Now().UTC()
}

// fail counts a lost line and warns, rate-limited.
func (w *stream) fail(err error) {
	n := w.failures.Add(1)
	if w.warn == nil {
		return
	}
	w.warnMu.Lock()
	defer w.warnMu.Unlock()
	now := time.Now()
	if !w.warnedAt.IsZero() && now.Sub(w.warnedAt) < time.Minute {
		return
	}
	w.warnedAt = now
	w.warn(err, n)
}

// streamWrite appends line (with its newline) to the segment of the
// current hour with one write(2). A failure is counted and returned.
func (s *Spool) streamWrite(line []byte) error {
	w := &s.stream
	hour := w.clock().Truncate(time.Hour)
	w.mu.RLock()
	if !w.open || !w.hour.Equal(hour) {
		w.mu.RUnlock()
		if err := s.streamOpen(hour); err != nil {
			w.fail(err)
			return err
		}
		w.mu.RLock()
	}
	fd := w.fd
	n, err := unix.Write(fd, line)
	w.mu.RUnlock()
	if err == nil && n != len(line) {
		// A short write (the disk filled up): end the fragment, so the
		// next line starts on a line of its own; readers skip it.
		_, _ = unix.Write(fd, []byte{'\n'})
		err = fmt.Errorf("short write: %d of %d bytes", n, len(line))
	}
	if err != nil {
		err = fmt.Errorf("event stream: %w", err)
		w.fail(err)
	}
	return err
}

// streamOpen makes the segment of hour the open one, unless another
// goroutine did, or an open failed less than streamRetryOpen ago.
func (s *Spool) streamOpen(hour time.Time) error {
	w := &s.stream
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open && w.hour.Equal(hour) {
		return nil
	}
	if w.failErr != nil && w.hour.Equal(hour) && time.Since(w.failedAt) < streamRetryOpen {
		return w.failErr
	}
	if w.open {
		_ = unix.Close(w.fd)
		w.open = false
	}
	w.hour = hour
	fd, err := openSegment(s.Path(StreamDir), StreamSegment(hour))
	if err != nil {
		w.failErr, w.failedAt = err, time.Now()
		return err
	}
	w.fd, w.open, w.failErr = fd, true, nil
	return nil
}

// openSegment opens dir/name for appending, making both if missing,
// without blocking or following a link: the directory and the segment must
// be a real directory and a regular file (a FIFO, a socket, a symlink or
// a directory planted there is refused at once).
func openSegment(dir, name string) (int, error) {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return -1, fmt.Errorf("event stream: %w", err)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("event stream: open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	path := filepath.Join(dir, name)
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return -1, fmt.Errorf("event stream: open %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("event stream: fstat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, fmt.Errorf("event stream: %s is not a regular file (mode %#o)", path, st.Mode&unix.S_IFMT)
	}
	return fd, nil
}

// emit bounds l, encodes it and appends it to the stream. A failure is
// counted (StreamFailures); transitions ignore the error: the stream must
// not fail them.
func (s *Spool) emit(l StreamLine) error {
	l.App = StreamApp
	l.Actor = truncate(l.Actor, maxStreamActor)
	l.Reason = truncate(l.Reason, maxStreamReason)
	if l.Level == "" {
		l.Level = "info"
	}
	b, err := json.Marshal(l)
	if err == nil && len(b)+1 > MaxStreamLine {
		err = fmt.Errorf("event stream: line of %d bytes over %d", len(b)+1, MaxStreamLine)
	}
	if err != nil {
		s.stream.fail(err)
		return err
	}
	return s.streamWrite(append(b, '\n'))
}

// streamTransition appends the stream line of a job's transition, with
// the fields and level of logx.Transition.
func (s *Spool) streamTransition(j *Job, ev Event) {
	_ = s.emit(TransitionLine(j.ID, j.Kind, ev))
}

// TransitionLine is the stream line of job id's (of kind) transition ev:
// what a spool's stream holds, and what farroctl events prints of a
// database's job_events.
func TransitionLine(id, kind string, ev Event) StreamLine {
	attempt := ev.Attempt
	level := "info"
	if ev.To == Killed || ev.To == Failed || ev.To == Stale {
		level = "warn"
	}
	return StreamLine{
		Timestamp: ev.Time.UTC().Format(StreamTimeLayout), Level: level, App: StreamApp,
		Actor: truncate(ev.Actor, maxStreamActor), JobID: id, CorrelationID: ev.CorrelationID, Kind: kind,
		Reason: truncate(ev.Reason, maxStreamReason), Attempt: &attempt,
		Event:   StreamEvent{Type: StreamTransition, From: string(ev.From), To: string(ev.To)},
		Message: "job status changed",
	}
}

// StreamRemoval appends the stream line of a terminal job deleted by
// actor (farroctl rm, managerd's retention).
func (s *Spool) StreamRemoval(j *Job, actor, reason string) {
	attempt := j.Attempts
	_ = s.emit(StreamLine{
		Timestamp: time.Now().UTC().Format(StreamTimeLayout), Actor: actor,
		JobID: j.ID, CorrelationID: j.CorrelationID, Kind: j.Kind, Reason: reason, Attempt: &attempt,
		Event:   StreamEvent{Type: StreamRemoved, From: string(j.Status)},
		Message: "job removed",
	})
}

// Audit is an operator's action, for the stream.
type Audit struct {
	Actor   string   // "farroctl"
	Command string   // e.g. "hold", "submit", "crawl pause"
	User    string   // the OS user's name ("" if unknown)
	UID     int      // the OS user's uid
	JobIDs  []string // the jobs acted on (all of them; the line lists the first few)
	Count   int      // how many (len(JobIDs) when 0)
	Failed  int      // how many of them the action failed on
	Reason  string   // the operator's reason or note
	Target  string   // what else it was about (a crawl, a domain)
}

// Audit appends an operator line to the stream. It returns an error only
// when the line could not be written (the action itself is done).
func (s *Spool) Audit(a Audit) error {
	uid := a.UID
	l := StreamLine{
		Timestamp: time.Now().UTC().Format(StreamTimeLayout), Actor: a.Actor,
		Reason: a.Reason, User: truncate(a.User, 64), UID: &uid, Count: a.Count, Failed: a.Failed,
		Target:  truncate(a.Target, 256),
		Event:   StreamEvent{Type: StreamOperator, Command: truncate(a.Command, 64)},
		Message: "operator action",
	}
	if l.Actor == "" {
		l.Actor = "farroctl"
	}
	if l.Count == 0 {
		l.Count = len(a.JobIDs)
	}
	if len(a.JobIDs) == 1 {
		l.JobID = a.JobIDs[0]
	}
	l.JobIDs = a.JobIDs
	if len(l.JobIDs) > maxStreamIDs {
		l.JobIDs, l.Truncated = l.JobIDs[:maxStreamIDs], true
	}
	return s.emit(l)
}
