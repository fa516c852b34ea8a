package frontier_test

import (
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
)

// TestPendingURLsKept: the frontier keeps each crawl's pending URLs
// where they are one read: frontier.json's pending_urls and the
// snapshot managerd's metrics read (PendingURLs), equal to the sum over
// the domain files; zero once the crawl is done.
func TestPendingURLsKept(t *testing.T) {
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 2, Levels: 2})
	defer site.Close()
	e := startEnv(t, 2)
	defer e.stop()
	c := plainCrawl(site, "pc")
	c.MaxPagesPerRun = 2
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, "pc")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Paused, 30*time.Second)
	var sum int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		doms, err := st.Domains()
		if err != nil {
			t.Fatal(err)
		}
		sum = 0
		for _, d := range doms {
			sum += d.Pending()
		}
		fr, err := st.LoadFrontier()
		if err != nil {
			t.Fatal(err)
		}
		if sum > 0 && fr.PendingURLs == sum && e.fr.PendingURLs()["pc"] == sum {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending: domains %d, frontier.json %d, snapshot %v", sum, fr.PendingURLs, e.fr.PendingURLs())
		}
	}
	if _, err := st.Update(func(c *crawl.Crawl) error {
		c.State, c.Run, c.MaxPagesPerRun = crawl.Running, c.Run+1, 0
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		fr, err := st.LoadFrontier()
		if err == nil && fr.PendingURLs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("done crawl: frontier.json pending_urls %d (%v), want 0", fr.PendingURLs, err)
		}
	}
}
