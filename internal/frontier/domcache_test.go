package frontier_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testcluster"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/job"
)

// TestTinyDomainCache crawls ten hosts with a domain cache of two
// entities, so that nearly every release and every ingest evicts a domain
// and reads another back from its file: every page and every robots.txt
// is fetched exactly once, and the crawl's counters equal a recount.
func TestTinyDomainCache(t *testing.T) {
	t.Parallel()
	const hosts, pages = 10, 6
	site := testsite.Start(testsite.Options{Plain: true, ExtraHosts: hosts, ExtraPages: pages})
	defer site.Close()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := testcluster.Start(t, s, testcluster.Config{Concurrency: 4, Rescan: 2 * time.Second, Poll: 50 * time.Millisecond, DomainCache: 2})
	defer c.Stop()
	cfg := testCrawl(site, "tiny")
	cfg.Scope = crawl.ScopeHost
	cfg.Delay = 0
	cfg.MaxInFlightPerDomain = 1
	cfg.Seeds = nil
	for i := 1; i <= hosts; i++ {
		cfg.Seeds = append(cfg.Seeds, crawl.Seed{URL: site.URL(fmt.Sprintf("t%d.site.test", i), "/")})
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(s, "tiny")
	if err := st.Create(cfg); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)

	fetched := map[string]int{}
	robotsN := map[string]int{}
	for _, r := range site.Log() {
		if testsite.IsRobots(r) {
			if r.URI == "/robots.txt" {
				robotsN[r.Host]++
			}
			continue
		}
		fetched[r.Host+r.URI]++
	}
	for i := 1; i <= hosts; i++ {
		h := fmt.Sprintf("t%d.site.test", i)
		if robotsN[h] != 1 {
			t.Errorf("%s: robots.txt fetched %d times, want once", h, robotsN[h])
		}
		for p := 0; p <= pages; p++ {
			uri := "/"
			if p > 0 {
				uri = fmt.Sprintf("/n/%d", p)
			}
			if n := fetched[h+uri]; n != 1 {
				t.Errorf("%s%s fetched %d times, want once", h, uri, n)
			}
			delete(fetched, h+uri)
		}
	}
	for u, n := range fetched {
		t.Errorf("unexpected fetch of %s (%d times)", u, n)
	}
	stored := recountEqual(t, st)
	if len(stored.Domains) != hosts {
		t.Errorf("%d domains, want %d", len(stored.Domains), hosts)
	}
	for name, dc := range stored.Domains {
		if dc.Crawled != pages+1 || dc.Discovered != pages+1 || dc.Released != pages+1 || dc.Pending != 0 || dc.InFlight != 0 {
			t.Errorf("domain %s: %+v; want %d discovered, released and crawled, none pending or in flight", name, dc, pages+1)
		}
	}
}
