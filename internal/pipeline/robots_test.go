package pipeline_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestCheckRobotsCopyHostile: a FIFO where a check keeps its robots.txt
// copy neither blocks the check nor is trusted: robots.txt is fetched
// again, obeyed, and the FIFO replaced by a copy.
func TestCheckRobotsCopyHostile(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	defer e.stop()
	host := "fifo.test"
	e.site.SetMode(host, livesite.ETag)
	e.site.SetRobots(host, "User-agent: *\nDisallow: /no\n")
	e.site.Set(host, "/no", livesite.Page("no"))
	src := e.addSource("no", host, "/no", nil)
	origin, err := crawl.Origin(src.URL)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(origin))
	dir := e.spool.Path(pipeline.RobotsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, hex.EncodeToString(sum[:16])+".json")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	e.run(pipeline.RunOptions{Politeness: pipeline.Politeness{MaxSources: 10, MaxPerDomain: 10, MinDomainInterval: 20 * time.Millisecond}})
	e.waitFor("the check", 10*time.Second, func() bool { return e.source("no").LastCheckedAt != nil })
	e.waitJobsDone(10 * time.Second)
	if s := e.source("no"); !strings.Contains(s.LastError, "Disallow: /no") {
		t.Errorf("check: outcome %s, error %q; want robots_denied", s.LastOutcome, s.LastError)
	}
	if n := e.site.Count(host, "/no", 0); n != 0 {
		t.Errorf("/no requested %d times", n)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("robots.txt copy: %v %v, want a regular file in place of the FIFO", fi, err)
	}
}
