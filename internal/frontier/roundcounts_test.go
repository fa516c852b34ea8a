package frontier_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testsite"
)

// TestRefreshRoundCounts: after two refresh rounds of a domain (domain
// reset re-crawls it: a refresh round), the domain table shows the pages
// crawled out of those discovered, never more (every page was fetched
// three times), pages_recrawled counts the revisits, and the counters
// still equal a recount.
func TestRefreshRoundCounts(t *testing.T) {
	t.Parallel()
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 2, Levels: 2})
	defer site.Close()
	e := startEnv(t, 2)
	defer e.stop()
	c := plainCrawl(site, "rounds")
	c.Seeds = c.Seeds[:1]
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, c.Name)
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	first := pagesOf(site.Log(), testsite.HostA)
	var out bytes.Buffer
	cl := &ctl.Ctl{Root: e.spool.Root, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out}
	dn := testsite.HostA + ":" + itoa(site.Port)
	for round := 1; round <= 2; round++ {
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
		if err := cl.DomainResetWith(ctl.DomainResetOptions{Crawl: c.Name, Domain: dn}); err != nil {
			t.Fatal(err)
		}
		if err := cl.CrawlResume(c.Name); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			d, err := st.LoadDomain(dn)
			cr, _ := st.Load()
			if err == nil && d.Round == round && d.Status == crawl.DomainExhausted && cr != nil && cr.State == crawl.Done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d not done", round)
			}
		}
	}
	got := pagesOf(site.Log(), testsite.HostA)
	for u := range first {
		if got[u] != 3 {
			t.Fatalf("page %s fetched %d times, want 3 (two refresh rounds)", u, got[u])
		}
	}
	d, err := st.LoadDomain(dn)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(first))
	if d.PagesDiscovered != n || d.PagesCrawled != 3*n || d.PagesRecrawled != 2*n {
		t.Errorf("discovered %d, crawled %d, recrawled %d; want %d, %d (every response), %d", d.PagesDiscovered, d.PagesCrawled, d.PagesRecrawled, n, 3*n, 2*n)
	}
	recountEqual(t, st)

	out.Reset()
	if err := cl.Domains(ctl.DomainsOptions{Crawl: c.Name}); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d/%d", n, n); !strings.Contains(out.String(), " "+want+" ") {
		t.Errorf("domain table: want PAGES %s (crawled/discovered):\n%s", want, out.String())
	}
	out.Reset()
	if err := cl.CrawlStatus(c.Name, true); err != nil {
		t.Fatal(err)
	}
	var sum ctl.CrawlSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.PerDomain) != 1 || sum.PerDomain[0].Crawled-sum.PerDomain[0].Recrawled != n || sum.PerDomain[0].Recrawled != 2*n {
		t.Errorf("crawl status --json rows: %+v", sum.PerDomain[0])
	}
}
