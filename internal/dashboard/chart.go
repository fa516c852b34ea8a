package dashboard

import (
	"sync"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

// chart is the last hour of the event stream in one-minute bins: jobs
// that succeeded (throughput) and jobs that failed or were killed.
type chart struct {
	Bins      []bin
	Succeeded int
	Failures  int
	Max       int
	Width     int
	Height    int
	From, To  time.Time
}

type bin struct {
	X, W             int
	OKY, OKH         int
	FailY, FailH     int
	Label            string
	Succeeded, Fails int
}

const chartBins = 60

// finish is one transition to a finished state, as the chart needs it.
type finish struct {
	at time.Time
	ok bool
}

// hourWindow keeps the last hour's finishes of the event stream, fed
// by an incremental tail, so that an overview reads only what was
// appended since the previous one.
type hourWindow struct {
	mu       sync.Mutex
	tail     *ctl.EventTail
	finishes []finish
	bad      int
}

// update reads what the stream gained and drops what is older than an hour.
func (h *hourWindow) update(c *ctl.Ctl, now time.Time) ([]finish, int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tail == nil {
		t, err := c.TailEvents(time.Hour)
		if err != nil {
			return nil, 0, err
		}
		h.tail = t
	}
	lines, bad, err := h.tail.NextFor(c)
	if err != nil {
		return nil, 0, err
	}
	h.bad = bad
	for i := range lines {
		l := &lines[i]
		if l.Event.Type != "state_transition" {
			continue
		}
		switch job.State(l.Event.To) {
		case job.Succeeded:
			h.finishes = append(h.finishes, finish{at: l.Time(), ok: true})
		case job.Failed, job.Killed:
			h.finishes = append(h.finishes, finish{at: l.Time()})
		}
	}
	from := now.Add(-time.Hour)
	keep := h.finishes[:0]
	for _, f := range h.finishes {
		if !f.at.Before(from) {
			keep = append(keep, f)
		}
	}
	h.finishes = keep
	return append([]finish(nil), keep...), h.bad, nil
}

// hourChart bins the finishes of the hour before now.
func hourChart(fs []finish, now time.Time) chart {
	c := chart{Width: 600, Height: 120, From: now.Add(-time.Hour), To: now}
	ok := make([]int, chartBins)
	bad := make([]int, chartBins)
	for _, f := range fs {
		if f.at.Before(c.From) || f.at.After(now) {
			continue
		}
		i := min(int(f.at.Sub(c.From)/time.Minute), chartBins-1)
		if f.ok {
			ok[i]++
			c.Succeeded++
		} else {
			bad[i]++
			c.Failures++
		}
	}
	for i := range chartBins {
		c.Max = max(c.Max, ok[i]+bad[i])
	}
	scale := 1
	if c.Max > 0 {
		scale = c.Max
	}
	w := c.Width / chartBins
	for i := range chartBins {
		okH := ok[i] * (c.Height - 10) / scale
		failH := bad[i] * (c.Height - 10) / scale
		if ok[i] > 0 && okH == 0 {
			okH = 1
		}
		if bad[i] > 0 && failH == 0 {
			failH = 1
		}
		start := c.From.Add(time.Duration(i) * time.Minute)
		c.Bins = append(c.Bins, bin{
			X: i * w, W: w - 1,
			OKY: c.Height - okH, OKH: okH,
			FailY: c.Height - okH - failH, FailH: failH,
			Label:     start.Format("15:04") + " UTC",
			Succeeded: ok[i], Fails: bad[i],
		})
	}
	return c
}
