package frontier_test

import (
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
)

func plainCrawl(site *testsite.Site, name string) *crawl.Crawl {
	c := testCrawl(site, name)
	c.Seeds = []crawl.Seed{{URL: site.URL(testsite.HostA, "/")}, {URL: site.URL(testsite.HostB, "/")}, {URL: site.URL(testsite.HostC, "/")}}
	c.Delay = 0
	c.MaxInFlightPerDomain = 2
	return c
}

func pageCounts(log []testsite.Request) (total int, per map[string]int) {
	per = map[string]int{}
	for _, r := range log {
		if !testsite.IsRobots(r) {
			total++
			per[r.Host]++
		}
	}
	return total, per
}

// TestBudgets: max_pages stops the crawl (done), max_pages_per_domain
// caps each domain, max_pages_per_run pauses it until resume.
func TestBudgets(t *testing.T) {
	t.Run("max_pages", func(t *testing.T) {
		site := testsite.Start(testsite.Options{Plain: true, Fanout: 4, Levels: 3})
		defer site.Close()
		e := startEnv(t, 4)
		c := plainCrawl(site, "mp")
		c.MaxPages = 10
		_ = c.Validate()
		st, _ := crawl.Open(e.spool, "mp")
		if err := st.Create(c); err != nil {
			t.Fatal(err)
		}
		got := waitState(t, st, crawl.Done, 30*time.Second)
		if n, _ := pageCounts(site.Log()); n != 10 {
			t.Errorf("%d pages fetched, max_pages 10", n)
		}
		if got.StateReason != "max_pages (10) reached" {
			t.Errorf("reason %q", got.StateReason)
		}
		doms, _ := st.Domains()
		for _, d := range doms {
			if d.Status == crawl.DomainActive {
				t.Errorf("domain %s still active in a crawl done on max_pages (%s %q)", d.Domain, d.Reason, d.ReasonDetail)
			}
			if d.Pending() > 0 && d.PagesReleased > 0 && (d.Status != crawl.DomainExhausted || d.Reason != crawl.ReasonBudget) {
				t.Errorf("domain %s: %s %q with %d pending, want exhausted, budget", d.Domain, d.Status, d.Reason, d.Pending())
			}
		}
	})
	t.Run("max_pages_per_domain", func(t *testing.T) {
		site := testsite.Start(testsite.Options{Plain: true, Fanout: 4, Levels: 3})
		defer site.Close()
		e := startEnv(t, 4)
		c := plainCrawl(site, "mpd")
		c.MaxPagesPerDomain = 3
		_ = c.Validate()
		st, _ := crawl.Open(e.spool, "mpd")
		if err := st.Create(c); err != nil {
			t.Fatal(err)
		}
		waitState(t, st, crawl.Done, 30*time.Second)
		n, per := pageCounts(site.Log())
		if n != 9 || per[testsite.HostA] != 3 || per[testsite.HostB] != 3 || per[testsite.HostC] != 3 {
			t.Errorf("%d pages %v, want 3 per domain", n, per)
		}
		doms, _ := st.Domains()
		for _, d := range doms {
			// A finished crawl leaves no domain active: held back by
			// its budget, it ends exhausted (reason budget), its URLs
			// still queued.
			if d.Reason != crawl.ReasonBudget || d.Status != crawl.DomainExhausted || d.Pending() == 0 {
				t.Errorf("domain %s: %s %q, %d pending; want exhausted, budget, URLs pending", d.Domain, d.Status, d.Reason, d.Pending())
			}
		}
	})
	t.Run("max_pages_per_run", func(t *testing.T) {
		site := testsite.Start(testsite.Options{Plain: true, Fanout: 3, Levels: 2})
		defer site.Close()
		e := startEnv(t, 4)
		c := plainCrawl(site, "mpr")
		c.Seeds = c.Seeds[:1]
		c.MaxPagesPerRun = 5
		_ = c.Validate()
		st, _ := crawl.Open(e.spool, "mpr")
		if err := st.Create(c); err != nil {
			t.Fatal(err)
		}
		waitState(t, st, crawl.Paused, 30*time.Second)
		time.Sleep(300 * time.Millisecond) // in-flight jobs finish; nothing more is released
		if n, _ := pageCounts(site.Log()); n != 5 {
			t.Errorf("run 1: %d pages, max_pages_per_run 5", n)
		}
		if _, err := st.Update(func(c *crawl.Crawl) error { c.State, c.Run = crawl.Running, c.Run+1; return nil }); err != nil {
			t.Fatal(err)
		}
		waitState(t, st, crawl.Paused, 30*time.Second)
		time.Sleep(300 * time.Millisecond)
		if n, _ := pageCounts(site.Log()); n != 10 {
			t.Errorf("runs 1 and 2: %d pages, want 10", n)
		}
		if _, err := st.Update(func(c *crawl.Crawl) error { c.State, c.Run = crawl.Running, c.Run+1; return nil }); err != nil {
			t.Fatal(err)
		}
		// The tree has 1 + 3 + 3*2 = 10 pages: run 3 finds nothing left.
		waitState(t, st, crawl.Done, 30*time.Second)
	})
}
