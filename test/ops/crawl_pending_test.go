package ops

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/logx/logxtest"
)

// TestCrawlPendingGauge: managerd exports each crawl's pending URLs as
// farro_crawl_pending_urls{crawl}, kept by its frontier, and farroctl
// crawl ls ends with their total over the running crawls. No agent runs:
// each domain's robots.txt job waits in the queue, so each seed stays
// pending.
func TestCrawlPendingGauge(t *testing.T) {
	dir := t.TempDir()
	spool := initSpool(t, dir)
	common := []string{"FARRO_SPOOL=" + spool, "FARRO_RESCAN=1s"}
	mgr := start(t, dir, "managerd", common, "managerd", "--metrics-addr", "127.0.0.1:0")
	addr := mgr.metricsAddr()
	farroctl(t, spool, "", "crawl", "start", "pc", "--seed", "http://a.test/", "--seed", "http://b.test/", "--allow-private")
	waitFor(t, 10*time.Second, "farro_crawl_pending_urls{crawl=\"pc\"} to be 2", func() bool {
		v, ok := sample(scrape(t, addr), "farro_crawl_pending_urls", "crawl", "pc")
		return ok && v == 2
	})
	waitFor(t, 10*time.Second, "crawl ls to count them", func() bool {
		return strings.Contains(farroctl(t, spool, "", "crawl", "ls"), "pending URLs: 2 in 1 running crawl(s); 0 more in 0 paused")
	})
	mgr.stop(syscall.SIGTERM)
	b, err := os.ReadFile(mgr.log)
	if err != nil {
		t.Fatal(err)
	}
	if n, problems := logxtest.Scan(b); n == 0 || len(problems) > 0 {
		t.Errorf("managerd's log: %d lines, problems %v", n, problems)
	}
}
