package ctl_test

import (
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
)

// writeDomain writes a domain entity with pending URLs queued.
func (e *env) writeDomain(crawlName string, d *crawl.Domain) {
	e.t.Helper()
	st, err := crawl.Open(e.s, crawlName)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := st.WriteDomain(d, true); err != nil {
		e.t.Fatal(err)
	}
}

func domainRow(t *testing.T, out, domain string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == domain || (len(f) > 1 && f[1] == domain)) {
			return l
		}
	}
	t.Fatalf("no row for %s in\n%s", domain, out)
	return ""
}

// TestDomainsNextFollowsCrawlState: a domain with URLs pending reads
// "now" only while its crawl runs; in a paused crawl NEXT says paused,
// in a done one done, and a domain held back by its budget says so.
func TestDomainsNextFollowsCrawlState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.newCrawlWithDomains("news", "a.example")
	now := time.Now().UTC()
	a := crawl.NewDomain("a.example", "a.example", now)
	a.Status = crawl.DomainActive
	a.Queue = []*crawl.Segment{{File: "1_0.jsonl", Depth: 1, Count: 5, Consumed: 2}}
	e.writeDomain("news", a)
	b := crawl.NewDomain("b.example", "b.example", now)
	b.Status, b.Reason, b.ReasonDetail = crawl.DomainExhausted, crawl.ReasonBudget, "max_pages (3) reached"
	b.Queue = []*crawl.Segment{{File: "1_0.jsonl", Depth: 1, Count: 4, Consumed: 1}}
	e.writeDomain("news", b)
	st, _ := crawl.Open(e.s, "news")

	next := func(args ctl.DomainsOptions, domain string) string {
		t.Helper()
		if err := e.ctl("").Domains(args); err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(domainRow(t, e.stdout.String(), domain))
		return f[len(f)-1]
	}
	if got := next(ctl.DomainsOptions{Crawl: "news"}, "a.example"); got != "now" {
		t.Errorf("running crawl: NEXT %q, want now", got)
	}
	if got := next(ctl.DomainsOptions{Crawl: "news"}, "b.example"); got != "budget" {
		t.Errorf("over budget: NEXT %q, want \"over budget\"", got)
	}
	if err := e.ctl("").CrawlPause("news"); err != nil {
		t.Fatal(err)
	}
	if got := next(ctl.DomainsOptions{}, "a.example"); got != "paused" {
		t.Errorf("paused crawl (domains): NEXT %q, want paused", got)
	}
	// crawl status prints the same table.
	if err := e.ctl("").CrawlStatus("news", false); err != nil {
		t.Fatal(err)
	}
	row := domainRow(t, e.stdout.String(), "a.example")
	if !strings.HasSuffix(row, "paused") || !strings.Contains(row, "active") {
		t.Errorf("paused crawl (crawl status): row %q, want status active and NEXT paused", row)
	}
	if _, err := st.Update(func(c *crawl.Crawl) error { c.State = crawl.Done; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := next(ctl.DomainsOptions{Crawl: "news"}, "a.example"); got != "done" {
		t.Errorf("done crawl: NEXT %q, want done", got)
	}
}
