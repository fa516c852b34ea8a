package frontier_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
)

// TestReleaseInCandidateOrder: when the crawl's in-flight cap lets one
// job out at a time, domains are served in the candidate order, active
// first, then by score: the seed ranks give the order (rank 1 first),
// whatever the domains' names, and a domain once started (active) is
// finished before the next one starts. The domain files carry the ranks
// and the seeds' source. Round robin by name (t1, t2, t3) fails it.
func TestReleaseInCandidateOrder(t *testing.T) {
	t.Parallel()
	site := testsite.Start(testsite.Options{Plain: true, ExtraHosts: 3, ExtraPages: 2})
	defer site.Close()
	e := startEnv(t, 2)
	cfg := testCrawl(site, "ranked")
	cfg.Scope = crawl.ScopeHost
	cfg.MaxDepth = 0
	cfg.Delay = 0
	cfg.MaxInFlight = 1
	ranks := map[string]int{"t1.site.test": 3, "t2.site.test": 1, "t3.site.test": 2}
	cfg.Seeds = nil
	for _, h := range []string{"t1.site.test", "t2.site.test", "t3.site.test"} {
		cfg.Seeds = append(cfg.Seeds, crawl.Seed{URL: site.URL(h, "/"), Rank: ranks[h], Source: "list_2026"})
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, "ranked")
	if err := st.Create(cfg); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	var hosts []string
	for _, r := range site.Log() {
		if len(hosts) == 0 || hosts[len(hosts)-1] != r.Host {
			hosts = append(hosts, r.Host)
		}
	}
	if got, want := strings.Join(hosts, " "), "t2.site.test t3.site.test t1.site.test"; got != want {
		t.Errorf("hosts served in the order %q, want %q (seed rank 1, 2, 3; each finished before the next)", got, want)
	}
	doms, err := st.Domains()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range doms {
		host, _, _ := strings.Cut(d.Domain, ":")
		if want, ok := ranks[host]; !ok || d.SeedRank != want || d.Source != "list_2026" {
			t.Errorf("domain %s: seed_rank %d, source %q; want %d, list_2026", d.Domain, d.SeedRank, d.Source, want)
		}
	}
	if len(doms) != len(ranks) {
		t.Errorf("%d domains, want %d: %v", len(doms), len(ranks), fmt.Sprint(doms))
	}
}
