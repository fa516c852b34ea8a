package frontier_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testsite"
)

// TestCrawlSetAndAddSeeds: a crawl done on max_pages goes on when
// farroctl crawl set raises it (its domain, exhausted on the budget,
// active again, every page fetched once); seeds added to a done crawl
// (and to a paused one, whose frontier applies the request live) are
// crawled in scope, their domains entering pending, a seed already
// queued or fetched not fetched twice.
func TestCrawlSetAndAddSeeds(t *testing.T) {
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 2, Levels: 2})
	defer site.Close()
	e := startEnv(t, 2)
	defer e.stop()
	c := plainCrawl(site, "grow")
	c.Seeds = c.Seeds[:1]
	c.Scope = crawl.ScopeHost
	c.MaxPages = 2
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, "grow")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	if n := pagesOf(site.Log(), testsite.HostA); len(n) != 2 {
		t.Fatalf("max_pages 2: fetched %v", n)
	}
	var out bytes.Buffer
	cl := &ctl.Ctl{Root: e.spool.Root, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out}

	unlimited := int64(0)
	if err := cl.CrawlSet(ctl.CrawlSetOptions{Name: "grow", MaxPages: &unlimited}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "max_pages 2 -> unlimited; done -> running (run 2)") {
		t.Errorf("crawl set: %s", out.String())
	}
	cr := waitState(t, st, crawl.Done, 30*time.Second)
	a := pagesOf(site.Log(), testsite.HostA)
	if len(a) != 5 {
		t.Errorf("after crawl set: fetched %v, want the 5 pages of a", a)
	}
	for u, n := range a {
		if n != 1 {
			t.Errorf("%s fetched %d times", u, n)
		}
	}
	if cr.StateReason != "nothing left to fetch" {
		t.Errorf("crawl done: %q", cr.StateReason)
	}

	// Seeds added to a done crawl: b's root is new (its host joins the
	// scope), a's root is a seed already, a's /p/1 was fetched: not
	// fetched again.
	out.Reset()
	if err := cl.CrawlAddSeeds(ctl.CrawlAddSeedsOptions{Name: "grow", URLs: []string{site.URL(testsite.HostB, "/"), site.URL(testsite.HostA, "/"), site.URL(testsite.HostA, "/p/1")}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2 seed(s) added, 1 already seeds") || !strings.Contains(out.String(), "done -> running (run 3)") {
		t.Errorf("add-seeds: %s", out.String())
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	b := pagesOf(site.Log(), testsite.HostB)
	if len(b) < 2 || b["/"] != 1 {
		t.Errorf("after add-seeds: b fetched %v, want its root and the pages it links to", b)
	}
	for u, n := range b {
		if n != 1 {
			t.Errorf("b%s fetched %d times", u, n)
		}
	}
	if n := pagesOf(site.Log(), testsite.HostA); n["/"] != 1 || n["/p/1"] != 1 {
		t.Errorf("a's pages added as seeds fetched again: %v", n)
	}
	out.Reset()
	if err := cl.CrawlAddSeeds(ctl.CrawlAddSeedsOptions{Name: "grow", URLs: []string{site.URL(testsite.HostB, "/")}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nothing added (1 already seeds)") {
		t.Errorf("add-seeds of a seed: %s", out.String())
	}

	// A paused crawl: the frontier drives it and queues the seed at once,
	// its new domain pending; released on resume.
	if _, err := st.Update(func(c *crawl.Crawl) error {
		c.State, c.StateReason, c.Run, c.FinishedAt = crawl.Paused, "test", c.Run+1, nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		l, err := crawl.TryFlock(st.Path(crawl.FrontierLock))
		if err != nil {
			break
		}
		l.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no frontier drives the paused crawl")
		}
	}
	out.Reset()
	if err := cl.CrawlAddSeeds(ctl.CrawlAddSeedsOptions{Name: "grow", URLs: []string{site.URL(testsite.HostC, "/")}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "the crawl is paused") {
		t.Errorf("add-seeds to a paused crawl: %s", out.String())
	}
	dc := strings.TrimSuffix(strings.TrimPrefix(site.URL(testsite.HostC, "/"), "http://"), "/")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := st.LoadDomain(dc)
		if err == nil && d.Status == crawl.DomainPending && d.Pending() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed of a paused crawl not queued: %+v %v", d, err)
		}
	}
	if n := pagesOf(site.Log(), testsite.HostC); len(n) != 0 {
		t.Errorf("paused crawl fetched %v", n)
	}
	if err := cl.CrawlResume("grow"); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	if n := pagesOf(site.Log(), testsite.HostC); len(n) < 2 || n["/"] != 1 {
		t.Errorf("after resume: c fetched %v", n)
	}
}
