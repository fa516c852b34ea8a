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

// pagesOf counts the page requests (robots.txt aside) per URI of host.
func pagesOf(log []testsite.Request, host string) map[string]int {
	m := map[string]int{}
	for _, r := range log {
		if r.Host == host && !testsite.IsRobots(r) {
			m[r.URI]++
		}
	}
	return m
}

// TestDomainResetRecrawls: farroctl domain reset re-crawls the domain:
// every page it fetched is fetched again (once), in a new round; with
// --no-recrawl nothing is. Both ways a reset travels are covered: applied
// by farroctl while no frontier drives the crawl (done), and as requests
// the frontier applies (paused, its frontier holding the crawl).
func TestDomainResetRecrawls(t *testing.T) {
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 2, Levels: 2})
	defer site.Close()
	e := startEnv(t, 2)
	defer e.stop()
	c := plainCrawl(site, "rc")
	c.Seeds = c.Seeds[:1]
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, "rc")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	first := pagesOf(site.Log(), testsite.HostA)
	if len(first) < 3 {
		t.Fatalf("first crawl fetched %v", first)
	}
	var out bytes.Buffer
	cl := &ctl.Ctl{Root: e.spool.Root, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out}
	dn := site.URL(testsite.HostA, "/")
	waitPages := func(want int, what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got := pagesOf(site.Log(), testsite.HostA)
			ok := len(got) == len(first)
			for u := range first {
				ok = ok && got[u] == want
			}
			cr, err := st.Load()
			if ok && err == nil && cr.State != crawl.Running {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: pages fetched %v, want each of %d pages %d times (crawl %v)", what, got, len(first), want, cr.State)
			}
		}
	}

	// Done crawl, no frontier (once the driver has let go of it): reset
	// at once, recrawl on resume.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l, err := crawl.TryFlock(st.Path(crawl.FrontierLock))
		if err == nil {
			l.Unlock()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the done crawl's frontier lock is still held")
		}
	}
	if err := cl.DomainResetWith(ctl.DomainResetOptions{Crawl: "rc", Domain: dn, Reason: "site redesigned"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "-> pending (reset)") || !strings.Contains(out.String(), "fetched again once the crawl is resumed") {
		t.Errorf("reset of a done crawl's domain: %s", out.String())
	}
	if err := cl.CrawlResume("rc"); err != nil {
		t.Fatal(err)
	}
	waitPages(2, "reset of a done crawl, resumed")
	waitState(t, st, crawl.Done, 30*time.Second)
	dom, err := st.LoadDomain(strings.TrimSuffix(strings.TrimPrefix(dn, "http://"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	if dom.Round != 1 || dom.Status != crawl.DomainExhausted {
		t.Errorf("after the recrawl: round %d, %s; want round 1, exhausted", dom.Round, dom.Status)
	}

	// --no-recrawl: the status is cleared, nothing is fetched again.
	out.Reset()
	if err := cl.DomainResetWith(ctl.DomainResetOptions{Crawl: "rc", Domain: dn, NoRecrawl: true}); err != nil {
		t.Fatal(err)
	}
	if err := cl.CrawlResume("rc"); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	waitPages(2, "reset --no-recrawl")

	// A paused crawl is driven by its frontier: the reset and the recrawl
	// are requests it applies; the pages are fetched on resume.
	if _, err := st.Update(func(c *crawl.Crawl) error {
		c.State, c.StateReason, c.Run, c.FinishedAt = crawl.Paused, "test", c.Run+1, nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if l, err := crawl.TryFlock(st.Path(crawl.FrontierLock)); err != nil {
			break // the frontier drives it
		} else {
			l.Unlock()
		}
		if time.Now().After(deadline) {
			t.Fatal("no frontier drives the paused crawl")
		}
	}
	out.Reset()
	if err := cl.DomainResetWith(ctl.DomainResetOptions{Crawl: "rc", Domain: dn, Reason: "again"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "reset requested") {
		t.Errorf("reset of a driven crawl's domain: %s", out.String())
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		dom, err = st.LoadDomain(dom.Domain)
		if err == nil && dom.Round == 2 && dom.Pending() == int64(len(first)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recrawl not applied while paused: %+v %v", dom, err)
		}
	}
	if dom.Reason != crawl.ReasonReset || !strings.Contains(dom.ReasonDetail, "again") {
		t.Errorf("domain reason %q %q, want reset with the operator's reason", dom.Reason, dom.ReasonDetail)
	}
	if n := pagesOf(site.Log(), testsite.HostA); len(n) != len(first) || n["/"] != 2 {
		t.Errorf("pages fetched while paused: %v", n)
	}
	if err := cl.CrawlResume("rc"); err != nil {
		t.Fatal(err)
	}
	waitPages(3, "reset of a paused crawl's domain, resumed")
}
