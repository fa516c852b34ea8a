package ctl_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
)

// rateCrawl creates crawl name whose run started runAge before now (and
// finished finishedAgo before now, if not 0), with outcomes at the given
// ages (the first denied of them, oldest first, robots.txt denials).
func (e *env) rateCrawl(name string, now time.Time, runAge, finishedAgo time.Duration, ages []time.Duration, denied int) {
	e.t.Helper()
	e.newCrawlWithDomains(name, "example.org")
	st, err := crawl.Open(e.s, name)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := st.Update(func(c *crawl.Crawl) error {
		c.CreatedAt, c.RunStarted = now.Add(-runAge), now.Add(-runAge)
		if finishedAgo > 0 {
			t := now.Add(-finishedAgo)
			c.State, c.FinishedAt = crawl.Done, &t
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	// outcomes.jsonl is appended as URLs finish: oldest first.
	sort.Slice(ages, func(i, j int) bool { return ages[i] > ages[j] })
	var b strings.Builder
	for i, a := range ages {
		o := crawl.OutcomeFetched
		if i < denied {
			o = crawl.OutcomeRobotsDenied
		}
		fmt.Fprintf(&b, `{"time":%q,"url":"http://example.org/%d","outcome":%q}`+"\n", now.Add(-a).Format(time.RFC3339Nano), i, o)
	}
	if err := os.WriteFile(st.Path(crawl.OutcomesFile), []byte(b.String()), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) crawlSummary(name string, now time.Time) ctl.CrawlSummary {
	e.t.Helper()
	c := e.ctl("")
	c.Now = func() time.Time { return now }
	if err := c.CrawlStatus(name, true); err != nil {
		e.t.Fatal(err)
	}
	var s ctl.CrawlSummary
	if err := json.Unmarshal(e.stdout.Bytes(), &s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// TestCrawlStatusRateOverActualRunningTime: the rate is measured over the
// last minute of the run's running time, not over a fixed 60 s: a crawl
// 10 s old is measured over its 10 s, a finished crawl over the minute
// before it finished (not over the idle hour since), and robots.txt
// denials and older outcomes are not counted. elapsed_ms and
// average_per_second are the crawl's own duration and fetched over it.
func TestCrawlStatusRateOverActualRunningTime(t *testing.T) {
	e := newEnv(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

	var young []time.Duration
	for i := 0; i < 22; i++ {
		young = append(young, time.Duration(i%9+1)*time.Second)
	}
	e.rateCrawl("young", now, 10*time.Second, 0, young, 2)
	s := e.crawlSummary("young", now)
	if !near(s.RatePerSecond, 2) || !near(s.RateWindowS, 10) || s.ElapsedMS != 10000 {
		t.Errorf("young crawl: rate %v over %v s, elapsed %d ms; want 2/s over 10 s, 10000 ms", s.RatePerSecond, s.RateWindowS, s.ElapsedMS)
	}

	var done []time.Duration
	for i := 0; i < 30; i++ {
		done = append(done, time.Hour+time.Duration(i)*time.Second)
	}
	done = append(done, time.Hour+2*time.Minute) // before the last minute
	e.rateCrawl("done", now, time.Hour+5*time.Minute, time.Hour, done, 0)
	s = e.crawlSummary("done", now)
	if !near(s.RatePerSecond, 0.5) || !near(s.RateWindowS, 60) || s.ElapsedMS != (5*time.Minute).Milliseconds() {
		t.Errorf("finished crawl: rate %v over %v s, elapsed %d ms; want 0.5/s over 60 s, 300000 ms", s.RatePerSecond, s.RateWindowS, s.ElapsedMS)
	}
	c := e.ctl("")
	c.Now = func() time.Time { return now }
	if err := c.CrawlStatus("done", false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.stdout.String(), "0.50 URLs/s (over the last 1m0s of running time)") {
		t.Errorf("table: %s", e.stdout)
	}
}

// TestCrawlStatusRateHostileOutcomes: a FIFO in place of outcomes.jsonl
// neither blocks crawl status nor counts anything.
func TestCrawlStatusRateHostileOutcomes(t *testing.T) {
	e := newEnv(t)
	now := time.Now().UTC()
	e.rateCrawl("fifo", now, time.Minute, 0, nil, 0)
	st, _ := crawl.Open(e.s, "fifo")
	p := st.Path(crawl.OutcomesFile)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan ctl.CrawlSummary, 1)
	go func() { done <- e.crawlSummary("fifo", now) }()
	select {
	case s := <-done:
		if s.RatePerSecond != 0 {
			t.Errorf("rate %v from a FIFO", s.RatePerSecond)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("crawl status blocked on a FIFO outcomes.jsonl")
	}
}
