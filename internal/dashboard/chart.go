package dashboard

import (
	"time"

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

// hourChart bins the transition lines of the hour before now.
func hourChart(lines []job.StreamLine, now time.Time) chart {
	c := chart{Width: 600, Height: 120, From: now.Add(-time.Hour), To: now}
	ok := make([]int, chartBins)
	bad := make([]int, chartBins)
	for i := range lines {
		l := &lines[i]
		if l.Event.Type != "state_transition" {
			continue
		}
		t := l.Time()
		if t.Before(c.From) || t.After(now) {
			continue
		}
		i := int(t.Sub(c.From) / time.Minute)
		if i >= chartBins {
			i = chartBins - 1
		}
		switch job.State(l.Event.To) {
		case job.Succeeded:
			ok[i]++
			c.Succeeded++
		case job.Failed, job.Killed:
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
