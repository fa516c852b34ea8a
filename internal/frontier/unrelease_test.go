package frontier_test

import (
	"os"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// TestReleaseRefusedIsUndone: a release pass submits its jobs in one batch
// at its end; a job the spool refuses (here: its lock is held by nobody's
// live submit) must not be counted as in flight. Its URL goes back to its
// queue and is released once the lock is gone, and fetched exactly once.
func TestReleaseRefusedIsUndone(t *testing.T) {
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 2, Levels: 2})
	defer site.Close()
	dir := t.TempDir()
	e := startEnvAt(t, dir, 2)
	c := plainCrawl(site, "undo")
	c.Seeds = c.Seeds[:1]
	c.ObeyRobots = false
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	id := crawl.FetchJobID("undo", c.Seeds[0].URL) // normalized by Validate
	lock := e.spool.LockPath(id)
	if err := fsq.TryLock(lock, []byte("actor=test\n")); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, "undo")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	// Several release passes find the seed's job refused.
	time.Sleep(500 * time.Millisecond)
	if locs, err := e.spool.Locate(id); err == nil {
		t.Fatalf("job %s exists while its lock is held: %v", id, locs)
	}
	if len(site.Log()) != 0 {
		t.Fatalf("requests while the seed could not be released: %v", site.Log())
	}
	if err := fsq.Unlock(lock); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 60*time.Second)
	counts := testsite.Counts(site.Log())
	exp := site.Expected(testsite.ExpectOptions{MaxDepth: c.MaxDepth, UserAgent: c.UserAgent, ObeyRobots: false})
	if len(exp.Fetched) < 2 {
		t.Fatalf("expected set too small: %v", exp.Fetched)
	}
	for k := range exp.Fetched {
		if counts[k] != 1 {
			t.Errorf("%s requested %d times, want once", k, counts[k])
		}
	}
	if _, err := os.Lstat(lock); !os.IsNotExist(err) {
		t.Errorf("lock left behind: %v", err)
	}
	if locs, err := e.spool.Locate(id); err != nil || locs[0].State != job.Succeeded {
		t.Errorf("seed job: %v %v", locs, err)
	}
}
