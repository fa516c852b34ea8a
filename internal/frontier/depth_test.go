package frontier_test

import (
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
)

// TestCrawlDepthReached: with max_depth 1, a.site.test (a tree four
// levels deep) ends exhausted with reason crawl_depth_reached, counting
// as many URLs beyond the depth as Expected finds; t1.site.test, whose
// pages all lie within depth 1, ends exhausted with no reason.
func TestCrawlDepthReached(t *testing.T) {
	t.Parallel()
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 3, Levels: 3, ExtraHosts: 1, ExtraPages: 4})
	defer site.Close()
	e := startEnv(t, 2)
	defer e.stop()
	c := plainCrawl(site, "depth")
	seedT1 := site.URL("t1.site.test", "/")
	c.Seeds = []crawl.Seed{{URL: site.URL(testsite.HostA, "/")}, {URL: seedT1}}
	c.MaxDepth = 1
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, c.Name)
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	exp := site.Expected(testsite.ExpectOptions{Seeds: []string{c.Seeds[0].URL, seedT1}, MaxDepth: 1, UserAgent: c.UserAgent, ObeyRobots: true})
	deepA := 0
	for k := range exp.TooDeep {
		if strings.HasPrefix(k, testsite.HostA+"/") {
			deepA++
		}
	}
	if deepA == 0 {
		t.Fatal("Expected finds nothing of a.site.test beyond depth 1")
	}
	port := ":" + itoa(site.Port)
	a, err := st.LoadDomain(testsite.HostA + port)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != crawl.DomainExhausted || a.Reason != crawl.ReasonCrawlDepthReached || a.LinksTooDeep != int64(deepA) ||
		!strings.Contains(a.ReasonDetail, "beyond max_depth (1)") {
		t.Errorf("a.site.test: %s %q (%s), %d URLs too deep; want exhausted, crawl_depth_reached, %d", a.Status, a.Reason, a.ReasonDetail, a.LinksTooDeep, deepA)
	}
	t1, err := st.LoadDomain("t1.site.test" + port)
	if err != nil {
		t.Fatal(err)
	}
	if t1.Status != crawl.DomainExhausted || t1.Reason != "" || t1.LinksTooDeep != 0 {
		t.Errorf("t1.site.test: %s %q, %d URLs too deep; want exhausted with no reason", t1.Status, t1.Reason, t1.LinksTooDeep)
	}
}
