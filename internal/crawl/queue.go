package crawl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// Entry is one line of a queue segment: a discovered URL waiting for its
// release.
type Entry struct {
	URL      string    `json:"url"` // normalized
	Depth    int       `json:"depth"`
	Priority int       `json:"priority,omitempty"`
	Hops     int       `json:"hops,omitempty"` // redirects followed to reach it
	From     string    `json:"from,omitempty"` // the page that linked to it ("" for seeds)
	At       time.Time `json:"at"`             // discovered
	// A refresh re-queues a known URL with the domain's new round and
	// the validators of its last response, so that it is fetched with a
	// conditional request (docs/PIPELINE.md).
	Round        int    `json:"round,omitempty"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	PrevSHA256   string `json:"prev_sha256,omitempty"`
	// Known: a refresh round's revisit of a URL that had a response
	// before (its response counts as pages_recrawled, not as a page
	// crawled for the first time).
	Known bool `json:"known,omitempty"`
	// A retry after a failed attempt (retry.go): Try numbers the
	// retry (its job ID's suffix), Failures counts the attempts held
	// against the URL.
	Try      int `json:"try,omitempty"`
	Failures int `json:"failures,omitempty"`
	// Requeued: put back after a release whose submit failed (the URL
	// was discovered before).
	Requeued bool `json:"requeued,omitempty"`
	// A page requisite (images.go).
	RequisiteRef
}

// Discovery reports whether the entry is a URL's first queueing (what
// a domain's pages_discovered counts): not a retry, not a refresh
// round's revisit, not a failed release put back.
func (e *Entry) Discovery() bool { return e.Try == 0 && e.Round == 0 && !e.Requeued }

// AppendEntries appends entries to the segment file at path (created if
// needed) and fsyncs it. It returns the file's new size.
func AppendEntries(path string, entries []Entry) (int64, error) {
	var buf bytes.Buffer
	for i := range entries {
		b, err := json.Marshal(&entries[i])
		if err != nil {
			return 0, err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	// O_NONBLOCK: a FIFO planted here fails the open (ENXIO) instead of
	// blocking the frontier until a reader comes.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return 0, fmt.Errorf("queue %s: %w", path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("queue %s: %w", path, fsq.ErrNotRegular)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		return 0, fmt.Errorf("queue %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("queue %s: fsync: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// ReadEntries reads up to max complete entries of the segment at path
// starting at byte offset. ends[i] is the offset just after entry i. A
// line that does not decode is returned as an entry with an empty URL (the
// caller skips it and still advances).
func ReadEntries(path string, offset int64, max int) (entries []Entry, ends []int64, err error) {
	f, _, err := fsq.OpenRegular(path) // a FIFO or symlink planted here is an error, never a blocked read
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	defer f.Close()
	chunk := 16 << 10
	pos := offset
	var pending []byte
	for len(entries) < max {
		buf := make([]byte, chunk)
		n, rerr := f.ReadAt(buf, pos)
		pos += int64(n)
		pending = append(pending, buf[:n]...)
		for len(entries) < max {
			i := bytes.IndexByte(pending, '\n')
			if i < 0 {
				break
			}
			line := pending[:i]
			offset += int64(i + 1)
			var e Entry
			if json.Unmarshal(line, &e) != nil {
				e = Entry{}
			}
			entries = append(entries, e)
			ends = append(ends, offset)
			pending = pending[i+1:]
		}
		if rerr == io.EOF || n == 0 {
			break
		}
		if rerr != nil {
			return entries, ends, rerr
		}
	}
	return entries, ends, nil
}

// RepairTail truncates a torn last line (a crash in the middle of an
// append) and returns the size of the file and the number of complete
// lines after byte offset from.
func RepairTail(path string, from int64) (size, lines int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, 0, nil
		}
		return 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size = fi.Size()
	if from > size {
		from = size
	}
	buf := make([]byte, 64<<10)
	pos, lastNL := from, from
	for pos < size {
		n, rerr := f.ReadAt(buf, pos)
		for i := 0; i < n; i++ {
			if buf[i] == '\n' {
				lines++
				lastNL = pos + int64(i) + 1
			}
		}
		pos += int64(n)
		if rerr != nil {
			break
		}
	}
	if lastNL < size {
		if err := f.Truncate(lastNL); err != nil {
			return 0, 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, 0, err
		}
		size = lastNL
	}
	return size, lines, nil
}
