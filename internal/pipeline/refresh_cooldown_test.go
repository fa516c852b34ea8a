package pipeline_test

import (
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/pipeline"
)

// TestRefreshCooldownPerCrawl: a crawl's refresh_cooldown (crawl start
// --refresh-cooldown) replaces the pipeline's refresh interval for its
// domains, both ways.
func TestRefreshCooldownPerCrawl(t *testing.T) {
	e := startEnv(t)
	host := "docs.test"
	siteTree(e.site, host)
	st := e.startCrawl("docs", host)
	e.waitCrawl("docs", crawl.Done, 1)
	e.waitJobsDone(10 * time.Second)
	set := func(d time.Duration) {
		t.Helper()
		if _, err := st.Update(func(c *crawl.Crawl) error { c.RefreshCooldown = crawl.Duration(d); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	set(time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	if rep := e.run(pipeline.RunOptions{Mode: pipeline.ModeAcquire, DryRun: true, RefreshInterval: time.Hour}); len(rep.Refresh) != 1 {
		t.Errorf("refresh_cooldown 1ms, pipeline interval 1h: refresh %+v, want the domain due", rep.Refresh)
	}
	set(time.Hour)
	if rep := e.run(pipeline.RunOptions{Mode: pipeline.ModeAcquire, DryRun: true, RefreshInterval: time.Millisecond}); len(rep.Refresh) != 0 {
		t.Errorf("refresh_cooldown 1h, pipeline interval 1ms: refresh %+v, want none due", rep.Refresh)
	}
}
