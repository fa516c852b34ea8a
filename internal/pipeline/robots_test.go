package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/pipeline/livesite"
	"github.com/farro-dev/farro/internal/source"
)

// TestCheckObeysRobots: a source whose URL the host's robots.txt
// disallows is not fetched; its check fails saying which rule; a source
// of the same host that robots.txt allows is checked. robots.txt is read
// once for both runs (the kept copy).
func TestCheckObeysRobots(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	defer e.stop()
	host := "robots.test"
	e.site.SetMode(host, livesite.ETag)
	e.site.SetRobots(host, "User-agent: *\nDisallow: /private\n")
	e.site.Set(host, "/private/page", livesite.Page("secret"))
	e.site.Set(host, "/pub", livesite.Page("public"))
	e.addSource("priv", host, "/private/page", nil)
	e.addSource("pub", host, "/pub", nil)
	e.run(pipeline.RunOptions{Politeness: pipeline.Politeness{MaxSources: 10, MaxPerDomain: 10, MinDomainInterval: 20 * time.Millisecond}})
	e.waitFor("both checks", 10*time.Second, func() bool {
		return e.source("priv").LastCheckedAt != nil && e.source("pub").Checks == 1
	})
	e.waitJobsDone(10 * time.Second)
	priv := e.source("priv")
	if priv.LastOutcome != source.Failed || !strings.Contains(priv.LastError, "robots.txt") || !strings.Contains(priv.LastError, "Disallow: /private") ||
		priv.Checks != 0 || priv.AcquirePending || priv.Acquisitions != 0 {
		t.Errorf("disallowed source: outcome %s, error %q, checks %d, acquisitions %d", priv.LastOutcome, priv.LastError, priv.Checks, priv.Acquisitions)
	}
	pub := e.source("pub")
	if pub.LastOutcome != source.First || pub.LastError != "" {
		t.Errorf("allowed source: outcome %s, error %q", pub.LastOutcome, pub.LastError)
	}
	e.waitCrawl(pub.Crawl, crawl.Done, 1) // its crawl reads robots.txt too
	e.waitJobsDone(10 * time.Second)
	if n := e.site.Count(host, "/private/page", 0); n != 0 {
		t.Errorf("/private/page requested %d times, robots.txt disallows it", n)
	}
	robots := e.site.Count(host, "/robots.txt", 0)
	if robots == 0 {
		t.Fatal("robots.txt never requested by the checks")
	}
	e.makeDue("priv")
	e.run(pipeline.RunOptions{Politeness: pipeline.Politeness{MaxSources: 10, MaxPerDomain: 10, MinDomainInterval: 20 * time.Millisecond}})
	e.waitFor("second check", 10*time.Second, func() bool { return e.source("priv").ConsecutiveFailures == 2 })
	e.waitJobsDone(10 * time.Second)
	if n := e.site.Count(host, "/private/page", 0); n != 0 {
		t.Errorf("/private/page requested %d times on the second run", n)
	}
	if n := e.site.Count(host, "/robots.txt", 0); n != robots {
		t.Errorf("robots.txt requested %d times after the second run, %d before: the copy was not used", n, robots)
	}
}
