package ctl

import (
	"bytes"
	"encoding/json"
	"io"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/fsq"
)

// crawlRateWindow is the longest stretch of a crawl's running time its rate is
// measured over.
const crawlRateWindow = time.Minute

// outcomesChunk is how much of outcomes.jsonl the rate reads at a time,
// from its end back to the window's start; outcomesTail caps the whole
// read (a crawl finishing more outcome lines in its last minute than that
// is measured over the part read: see countOutcomes).
const (
	outcomesChunk = 1 << 20
	outcomesTail  = 64 << 20
)

// crawlRate is a crawl's rate for status: URLs finished (robots.txt
// denials aside) per second over the last minute of the current run's
// running time. The window ends when the crawl finished (or now, while it
// has not) and starts a minute before, or when the run started if that is
// later, so a crawl younger than a minute is measured over its actual age
// and a finished crawl over its last minute, not over the idle time since.
// A window shorter than a second counts as a second. It returns the rate
// and the window's length.
func crawlRate(st *crawl.Store, cr *crawl.Crawl, now time.Time) (float64, time.Duration) {
	end := now
	if cr.FinishedAt != nil && cr.FinishedAt.Before(now) {
		end = *cr.FinishedAt
	}
	start := end.Add(-crawlRateWindow)
	runStart := cr.RunStarted
	if runStart.IsZero() {
		runStart = cr.CreatedAt
	}
	if runStart.After(start) {
		start = runStart
	}
	span := end.Sub(start)
	if span <= 0 {
		return 0, 0
	}
	n, from := countOutcomes(st.Path(crawl.OutcomesFile), start, end)
	if from.After(start) && from.Before(end) {
		// The read stopped at its cap inside the window: the rate is
		// the part read's, not the whole window's count diluted.
		span = end.Sub(from)
	}
	return float64(n) / max(span, time.Second).Seconds(), span
}

// countOutcomes counts the outcomes (robots.txt denials aside) recorded in
// (start, end], reading outcomes.jsonl backwards from its end, a chunk at a
// time, until a line at or before start (or outcomesTail bytes) through
// fsq's non-blocking regular-file open: a symlink, FIFO or other hostile
// entry counts nothing and never blocks. When the read stops at its cap
// before reaching start, from is the time of the oldest line it read
// (the count covers (from, end]); otherwise from is start.
func countOutcomes(path string, start, end time.Time) (n int, from time.Time) {
	from = start
	f, size, err := fsq.OpenRegular(path)
	if err != nil {
		return 0, from
	}
	defer f.Close()
	var carry []byte // the partial first line of the chunk read last
	oldest := time.Time{}
	for pos := size; pos > 0; {
		if size-pos >= outcomesTail {
			if !oldest.IsZero() {
				from = oldest
			}
			return n, from
		}
		off := max(pos-outcomesChunk, 0)
		buf := make([]byte, pos-off, pos-off+int64(len(carry)))
		if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
			return n, from
		}
		buf = append(buf, carry...)
		pos = off
		lines := bytes.Split(buf, []byte("\n"))
		carry = nil
		if off > 0 {
			carry, lines = lines[0], lines[1:] // completed by the chunk before it
		}
		for i := len(lines) - 1; i >= 0; i-- {
			var o struct {
				Time    time.Time `json:"time"`
				Outcome string    `json:"outcome"`
			}
			if json.Unmarshal(lines[i], &o) != nil {
				continue
			}
			if !o.Time.After(start) {
				return n, from
			}
			oldest = o.Time
			if o.Time.After(end) || o.Outcome == crawl.OutcomeRobotsDenied {
				continue
			}
			n++
		}
	}
	return n, from
}

// crawlElapsed is the crawl's own duration: from its creation to when it
// finished, or to now while it has not.
func crawlElapsed(cr *crawl.Crawl, now time.Time) time.Duration {
	end := now
	if cr.FinishedAt != nil && cr.FinishedAt.Before(now) {
		end = *cr.FinishedAt
	}
	return max(end.Sub(cr.CreatedAt), 0)
}
