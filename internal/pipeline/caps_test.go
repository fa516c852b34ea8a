package pipeline_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/pipeline/livesite"
)

// TestRunCapsEnforced: a run with two sources of one 30-page site and
// caps of 10 requests to a domain spends at most 10 requests there
// (robots.txt aside): its two checks, then 4 pages per acquisition, after
// which each source's crawl pauses on its run budget; the crawls space
// their requests by the run's interval, not the sources' shorter delay.
// A next run resumes them with a new share.
func TestRunCapsEnforced(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	defer e.stop()
	host := "big.test"
	e.site.SetMode(host, livesite.HashOnly)
	var links []string
	for i := 1; i <= 30; i++ {
		links = append(links, fmt.Sprintf("/p%d", i))
	}
	e.site.Set(host, "/", livesite.Page("home", links...))
	for _, l := range links {
		e.site.Set(host, l, livesite.Page(l, "/"))
	}
	e.site.Set(host, "/hub", livesite.Page("hub", links...))
	s1 := e.addSource("home", host, "/", nil)
	s2 := e.addSource("hub", host, "/hub", nil)
	interval := 40 * time.Millisecond
	pol := pipeline.Politeness{MaxSources: 20, MaxPerDomain: 3, MinDomainInterval: interval, MaxDomainRequests: 10, MaxRequests: 100}
	rep := e.run(pipeline.RunOptions{Politeness: pol})
	if len(rep.Checks) != 2 || rep.Checks[0].Budget == nil || rep.Checks[0].Budget.MaxPagesPerDomain != 4 {
		t.Fatalf("checks %+v", rep.Checks)
	}
	for _, s := range []string{s1.Crawl, s2.Crawl} {
		c := e.waitCrawl(s, crawl.Paused, 1)
		if c.MaxPagesPerDomainPerRun != 4 || c.MaxPagesPerRun != 49 || c.Delay.D() != interval {
			t.Errorf("crawl %s: per run %d, per domain per run %d, delay %s; want 49, 4, %s", s, c.MaxPagesPerRun, c.MaxPagesPerDomainPerRun, c.Delay.D(), interval)
		}
	}
	e.waitJobsDone(10 * time.Second)
	pages := func() int {
		n := 0
		for _, r := range e.site.Log() {
			if r.Host == host && r.Path != "/robots.txt" {
				n++
			}
		}
		return n
	}
	if n := pages(); n != 10 {
		t.Errorf("run 1: %d requests to %s (robots.txt aside), want its cap 10", n, host)
	}
	// Each crawl's requests are spaced by the run's interval (the
	// sources' delay is 5ms), as its fetchers wrote them.
	for _, s := range []string{s1.Crawl, s2.Crawl} {
		var times []time.Time
		for _, o := range e.outcomes(s) {
			if o.FetchedAt != nil {
				times = append(times, *o.FetchedAt)
			}
		}
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		for i := 1; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); gap < interval-5*time.Millisecond {
				t.Errorf("crawl %s: two requests %s apart, want >= %s", s, gap, interval)
			}
		}
	}

	// Run 2: both changed; their acquisitions resume the paused crawls
	// with a new share.
	e.site.Set(host, "/", livesite.Page("home, edited", links...))
	e.site.Set(host, "/hub", livesite.Page("hub, edited", links...))
	e.makeDue("home")
	e.makeDue("hub")
	e.run(pipeline.RunOptions{Politeness: pol})
	for _, s := range []string{s1.Crawl, s2.Crawl} {
		e.waitCrawl(s, crawl.Paused, 2)
	}
	e.waitJobsDone(10 * time.Second)
	if n := pages(); n != 20 {
		t.Errorf("after run 2: %d requests to %s (robots.txt aside), want 2 x 10", n, host)
	}
}
