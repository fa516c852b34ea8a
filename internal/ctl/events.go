package ctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// EventsOptions are the flags of `farroctl events`.
type EventsOptions struct {
	Follow bool          // keep reading as lines are appended and segments appear
	Job    string        // only the lines about this job (its transitions, the actions naming it)
	Since  time.Duration // only lines newer than this (0: the whole stream)
	JSON   bool          // print the stream's lines as they are (JSON Lines)
	// Poll is how often Follow looks for new lines (default 250ms).
	Poll time.Duration
	// Context ends Follow (nil: it runs until the process is stopped).
	Context context.Context
}

// eventsReader reads the stream's segments in order, remembering how far
// it read each one, so that Follow picks up where it stopped.
type eventsReader struct {
	s      *job.Spool
	o      EventsOptions
	since  time.Time
	offset map[string]int64 // bytes of whole lines read, per segment
	bad    int              // unreadable lines skipped
	emit   func(line []byte, l *job.StreamLine) error
}

// Events prints the spool's event stream (events/*.jsonl): every job
// transition and every operator action, oldest first, as a table or
// (JSON) the lines as they are. Follow keeps printing new lines, from new
// segments too, until Context ends.
func (c *Ctl) Events(o EventsOptions) error {
	if o.Job != "" {
		if err := job.ValidateID(o.Job); err != nil {
			return UsageError(err)
		}
	}
	if o.Since < 0 {
		return Usagef("--since must not be negative")
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	ctx := o.Context
	if ctx == nil {
		ctx = context.Background()
	}
	out := bufio.NewWriter(c.Stdout)
	emit := func(line []byte, l *job.StreamLine) error {
		if o.JSON {
			out.Write(line)
			return out.WriteByte('\n')
		}
		_, err := io.WriteString(out, formatEvent(l)+"\n")
		return err
	}
	if c.OnStore() {
		return c.storeEvents(ctx, o, emit, out)
	}
	s, err := c.existing()
	if err != nil {
		return err
	}
	r := &eventsReader{s: s, o: o, offset: map[string]int64{}, emit: emit}
	if o.Since > 0 {
		r.since = c.now().Add(-o.Since)
	}
	for {
		if err := r.pass(!o.Follow); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
		if !o.Follow {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Poll):
		}
	}
	if r.bad > 0 {
		c.warnf("events: %d unreadable line(s) skipped", r.bad)
	}
	return nil
}

// pass reads what was appended since the last pass, segment by segment.
// final: a last line without its newline is torn (skipped), not awaited.
func (r *eventsReader) pass(final bool) error {
	names, err := r.s.StreamSegments()
	if err != nil {
		return err
	}
	for i, name := range names {
		if !r.since.IsZero() {
			if hour, _ := job.ParseStreamSegment(name); hour.Add(time.Hour).Before(r.since) {
				continue
			}
		}
		// A writer that opened its segment just before the hour turned
		// may still append to it: the last two segments are read again;
		// older ones once.
		if _, seen := r.offset[name]; seen && i < len(names)-2 {
			continue
		}
		if err := r.segment(name, final); err != nil {
			return err
		}
	}
	return nil
}

// segment reads name from its offset to its last whole line.
func (r *eventsReader) segment(name string, final bool) error {
	f, err := r.s.OpenStreamSegment(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed by retention meanwhile
	}
	if err != nil {
		// Something planted where a segment should be: say so once.
		if _, seen := r.offset[name]; !seen {
			r.offset[name] = 0
			r.bad++
		}
		return nil
	}
	defer f.Close()
	off := r.offset[name]
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, whole, n, err := readStreamLine(br)
		if n == 0 && err != nil {
			break
		}
		if !whole && !final {
			break // being written: read it whole next time
		}
		off += int64(n)
		if !whole || len(line) == 0 {
			if len(line) > 0 || n > job.MaxStreamLine {
				r.bad++
			}
			continue
		}
		var l job.StreamLine
		if json.Unmarshal(line, &l) != nil {
			r.bad++
			continue
		}
		if r.o.Job != "" && !l.Has(r.o.Job) {
			continue
		}
		if !r.since.IsZero() && l.Time().Before(r.since) {
			continue
		}
		if err := r.emit(line, &l); err != nil {
			return err
		}
	}
	r.offset[name] = off
	return nil
}

// readStreamLine reads one line: its bytes without the newline (nil when
// it was longer than job.MaxStreamLine: never loaded whole), whether it
// ended with a newline, and how many bytes it took.
func readStreamLine(br *bufio.Reader) (line []byte, whole bool, n int, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		if len(buf)+len(chunk) <= job.MaxStreamLine {
			buf = append(buf, chunk...)
		} else {
			buf = buf[:0]
		}
		switch {
		case err == nil:
			if n > job.MaxStreamLine {
				return nil, true, n, nil
			}
			return buf[:len(buf)-1], true, n, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			if n > job.MaxStreamLine {
				buf = nil
			}
			return buf, false, n, err
		}
	}
}

// formatEvent renders a stream line as one line of text.
func formatEvent(l *job.StreamLine) string {
	ts := l.Timestamp
	if t := l.Time(); !t.IsZero() {
		ts = t.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-12s  ", oneLine(ts), oneLine(dash(l.Actor)))
	switch l.Event.Type {
	case job.StreamTransition:
		fmt.Fprintf(&b, "%s  %s -> %s", dash(l.JobID), dash(l.Event.From), dash(l.Event.To))
		if l.Attempt != nil {
			fmt.Fprintf(&b, "  attempt %d", *l.Attempt)
		}
	case job.StreamRemoved:
		fmt.Fprintf(&b, "%s  removed (was %s)", dash(l.JobID), dash(l.Event.From))
	case job.StreamOperator:
		who := dash(l.User)
		if l.UID != nil {
			who = fmt.Sprintf("%s (uid %d)", who, *l.UID)
		}
		fmt.Fprintf(&b, "%s by %s", dash(l.Event.Command), who)
		if l.Target != "" {
			fmt.Fprintf(&b, ": %s", l.Target)
		}
		if len(l.JobIDs) > 0 {
			b.WriteString(": " + strings.Join(l.JobIDs, " "))
			if l.Truncated {
				fmt.Fprintf(&b, " … (%d jobs)", l.Count)
			}
		} else if l.Count > 0 {
			fmt.Fprintf(&b, ": %d jobs", l.Count)
		}
		if l.Failed > 0 {
			fmt.Fprintf(&b, " (%d failed)", l.Failed)
		}
	default:
		fmt.Fprintf(&b, "%s  %s", dash(l.Event.Type), dash(l.JobID))
	}
	if l.Reason != "" {
		b.WriteString("  " + l.Reason)
	}
	return strings.Map(func(r rune) rune { // no terminal control from a planted line
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return ' '
		}
		return r
	}, b.String())
}
