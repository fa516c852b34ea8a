package frontier_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
)

// TestSeenSetLoss: the seen-set is an optimisation; the spool's refusal
// of a second job with the same ID is what keeps a URL from being fetched
// twice. The seen-set is wiped in the middle of a crawl (as if a power cut
// had lost its unsynced writes) and the crawl resumed under a new
// frontier: links to URLs already fetched are queued again, their release
// is refused as a duplicate, and no URL is requested twice.
func TestSeenSetLoss(t *testing.T) {
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 4, Levels: 3})
	defer site.Close()
	dir := t.TempDir()
	e := startEnvAt(t, dir, 4)
	c := plainCrawl(site, "loss")
	c.Seeds = c.Seeds[:1]
	c.MaxPagesPerRun = 12
	_ = c.Validate()
	st, _ := crawl.Open(e.spool, "loss")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Paused, 30*time.Second)
	time.Sleep(300 * time.Millisecond)
	e.stop()
	for _, sub := range []string{crawl.SeenDir, crawl.DeepDir} {
		if err := os.RemoveAll(filepath.Join(st.Root, sub)); err != nil {
			t.Fatal(err)
		}
	}
	startEnvAt(t, dir, 4) // a new frontier, with an empty seen-set
	if _, err := st.Update(func(c *crawl.Crawl) error { c.State, c.Run, c.MaxPagesPerRun = crawl.Running, c.Run+1, 0; return nil }); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 60*time.Second)
	counts := testsite.Counts(site.Log())
	exp := site.Expected(testsite.ExpectOptions{MaxDepth: c.MaxDepth, UserAgent: c.UserAgent, ObeyRobots: true})
	for k, n := range counts {
		if n > 1 {
			t.Errorf("%s requested %d times", k, n)
		}
	}
	for k := range exp.Fetched {
		if counts[k] != 1 {
			t.Errorf("%s requested %d times, want once", k, counts[k])
		}
	}
}
