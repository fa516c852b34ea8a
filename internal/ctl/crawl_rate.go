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

// outcomesTail is how much of the end of outcomes.jsonl the rate reads.
const outcomesTail = 4 << 20

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
	n := countOutcomes(st.Path(crawl.OutcomesFile), start, end)
	return float64(n) / max(span, time.Second).Seconds(), span
}

// countOutcomes counts the outcomes (robots.txt denials aside) recorded in
// (start, end], reading the tail of outcomes.jsonl through fsq's
// non-blocking regular-file open: a symlink, FIFO or other hostile entry
// counts nothing and never blocks.
func countOutcomes(path string, start, end time.Time) int {
	f, size, err := fsq.OpenRegular(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	off := max(size-outcomesTail, 0)
	buf := make([]byte, size-off)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return 0
	}
	lines := bytes.Split(buf, []byte("\n"))
	if off > 0 && len(lines) > 0 {
		lines = lines[1:] // a partial first line
	}
	n := 0
	for i := len(lines) - 1; i >= 0; i-- {
		var o struct {
			Time    time.Time `json:"time"`
			Outcome string    `json:"outcome"`
		}
		if json.Unmarshal(lines[i], &o) != nil {
			continue
		}
		if !o.Time.After(start) {
			break
		}
		if o.Time.After(end) || o.Outcome == crawl.OutcomeRobotsDenied {
			continue
		}
		n++
	}
	return n
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
