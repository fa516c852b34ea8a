package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"time"

	"github.com/farro-dev/farro/internal/metrics"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// tailSegments is how many of the newest event stream segments a
// submission tail follows: a writer whose clock is behind may still
// append to the previous hour's segment.
const tailSegments = 3

// SubmissionTail counts submissions (farro_submitted_total) from the
// spool-wide event stream: a transition line from no state is a submit,
// whoever made it (farroctl, the crawl frontier), into incoming/,
// deferred/ or held/. It reads only what was appended since its last
// poll: no job.json is read. It starts at the stream's end, so what was
// submitted before managerd started is not counted (a counter starts at
// zero with its process).
type SubmissionTail struct {
	store *spoolstore.Store
	count func(kind, actor string)
	offs  map[string]int64  // segment name -> bytes consumed
	part  map[string][]byte // an unfinished last line
	skip  map[string]bool   // inside an over-long line
}

// NewSubmissionTail returns a tail positioned at the end of the stream;
// count is called once per submission line (nil: metrics.Submitted).
func NewSubmissionTail(s *spoolstore.Store, count func(kind, actor string)) (*SubmissionTail, error) {
	if count == nil {
		count = metrics.Submitted
	}
	t := &SubmissionTail{store: s, count: count, offs: map[string]int64{}, part: map[string][]byte{}, skip: map[string]bool{}}
	names, err := t.newest()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if size, err := t.stat(n); err == nil {
			t.offs[n] = size
		}
	}
	return t, nil
}

// newest lists the last tailSegments segments.
func (t *SubmissionTail) newest() ([]string, error) {
	names, err := t.store.StreamSegments()
	if err != nil {
		return nil, err
	}
	return names[max(0, len(names)-tailSegments):], nil
}

// stat returns a segment's size (a regular file only: a FIFO or a symlink
// named like one is refused without blocking).
func (t *SubmissionTail) stat(name string) (int64, error) {
	f, err := t.store.OpenStreamSegment(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Poll reads what the newest segments gained since the last poll and
// counts its submissions. A segment that cannot be read is skipped (and
// reported) without stopping the others; a line longer than
// job.MaxStreamLine or not JSON is skipped.
func (t *SubmissionTail) Poll() error {
	names, err := t.newest()
	if err != nil {
		return err
	}
	keep := make(map[string]bool, len(names))
	var errs []error
	for _, n := range names {
		keep[n] = true
		if err := t.read(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for n := range t.offs {
		if !keep[n] {
			delete(t.offs, n)
			delete(t.part, n)
			delete(t.skip, n)
		}
	}
	return errors.Join(errs...)
}

// read consumes segment name from its offset to its end.
func (t *SubmissionTail) read(name string) error {
	f, err := t.store.OpenStreamSegment(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	off := t.offs[name]
	if fi.Size() < off { // rewritten by hand: nothing we know of it
		t.offs[name], t.part[name], t.skip[name] = fi.Size(), nil, false
		return nil
	}
	if fi.Size() == off {
		return nil
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for off < fi.Size() {
		n, err := f.Read(buf[:min(int64(len(buf)), fi.Size()-off)])
		off += int64(n)
		t.feed(name, buf[:n])
		if err == io.EOF || n == 0 {
			break
		}
		if err != nil {
			t.offs[name] = off
			return err
		}
	}
	t.offs[name] = off
	return nil
}

// feed splits data into lines, keeping an unfinished line for the next
// read; a line longer than job.MaxStreamLine is skipped up to its newline.
func (t *SubmissionTail) feed(name string, data []byte) {
	part, skip := t.part[name], t.skip[name]
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if !skip && len(part)+len(data) > job.MaxStreamLine {
				part, skip = nil, true
			} else if !skip {
				part = append(part, data...)
			}
			break
		}
		if !skip && len(part)+i <= job.MaxStreamLine {
			t.line(append(part, data[:i]...))
		}
		part, skip = nil, false
		data = data[i+1:]
	}
	t.part[name], t.skip[name] = part, skip
}

// line counts one stream line if it is a submission.
func (t *SubmissionTail) line(b []byte) {
	var l job.StreamLine
	if json.Unmarshal(b, &l) != nil {
		return
	}
	if l.Event.Type == job.StreamTransition && l.Event.From == "" && l.Event.To != "" && l.JobID != "" {
		t.count(l.Kind, l.Actor)
	}
}

// Run polls the event stream every interval until ctx is done, counting
// submissions. Errors reading a segment go to onError (if set) and the
// segment is tried again at the next poll.
func (t *SubmissionTail) Run(ctx context.Context, interval time.Duration, onError func(error)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := t.Poll(); err != nil && onError != nil {
				onError(err)
			}
		}
	}
}
