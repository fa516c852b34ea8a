package crawl_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/realsite"
)

// realUA is the User-Agent farro crawls the real tree with (nginx's log
// tells it from wget's).
const realUA = "farro-realsite-test/1.0"

// TestCrawlRealSite crawls a real HTML tree nobody here wrote (the
// PostgreSQL documentation, Debian's postgresql-doc-15: about 1,170
// interlinked pages) served by a private nginx on 127.0.0.1, with the real
// daemons and with wget --recursive --level=inf, and compares from
// nginx's access log: farro fetched the same set of HTML pages as wget
// (the difference is printed), none twice, and none that robots.txt
// (served with a Disallow of the tutorial's pages) forbids; wget obeys it
// too. Every counter farro shows then equals a recount.
func TestCrawlRealSite(t *testing.T) {
	bin := binaries(t)
	if why := realsite.Available(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("real-site test bed: %s (.ci/run installs them)", why)
		}
		t.Skipf("real-site test bed: %s (apt-get install nginx-light wget %s)", why, realsite.Package)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // nginx's workers run as nobody
		t.Fatal(err)
	}
	ng, err := realsite.Start(filepath.Join(dir, "nginx"), realsite.DocRoot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ng.Stop)

	f := newFarro(t, bin, dir)
	f.startWatchdog()
	f.startManager()
	f.startAgents(1, 32)
	start := time.Now()
	f.ctl("crawl", "start", "pg", "--seed", ng.URL(realsite.Seed), "--allow-private", "--user-agent", realUA,
		"--scope", "host", "--max-depth", "1000", "--delay", "0s", "--jitter", "0s", "--max-in-flight-per-domain", "64", "--max-in-flight", "64")
	f.waitState("pg", crawl.Done, 60*time.Second)
	farroTime := time.Since(start)

	wgetTime, err := realsite.Wget(ng, dir, filepath.Join(dir, "logs", "wget.log"), 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	log, err := ng.Log()
	if err != nil {
		t.Fatal(err)
	}
	fr, wg := realsite.Analyze(log, realUA), realsite.Analyze(log, realsite.WgetUA)
	if wg.Pages() < 1000 {
		t.Fatalf("wget fetched %d HTML pages of the tree; expected about 1,170 (log %s)", wg.Pages(), ng.AccessLog)
	}
	onlyFarro, onlyWget := realsite.Diff(fr, wg)
	if len(onlyFarro) > 0 || len(onlyWget) > 0 {
		t.Errorf("HTML pages fetched differ: %d only by farro %v; %d only by wget %v", len(onlyFarro), onlyFarro, len(onlyWget), onlyWget)
	}
	if fr.Duplicates > 0 {
		var twice []string
		for u, n := range fr.HTML {
			if n > 1 {
				twice = append(twice, u)
			}
		}
		t.Errorf("farro made %d duplicate requests (HTML pages fetched more than once: %v)", fr.Duplicates, twice)
	}
	if fr.Robots != 1 {
		t.Errorf("farro requested robots.txt %d times, want 1", fr.Robots)
	}
	if len(fr.Forbidden) > 0 {
		t.Errorf("farro requested %d URLs robots.txt disallows: %v", len(fr.Forbidden), fr.Forbidden)
	}
	if len(wg.Forbidden) > 0 {
		t.Errorf("wget requested %d URLs robots.txt disallows (the comparison assumes it obeys): %v", len(wg.Forbidden), wg.Forbidden)
	}
	sum := checkRecount(t, f, "pg")
	// Every request but robots.txt and the sitemap the robots job looks
	// for (/sitemap.xml, a 404 here) is a page fetched.
	if pages := fr.Requests - fr.Robots - fr.Sitemaps; sum.Fetched != int64(pages) {
		t.Errorf("crawl status: fetched %d; nginx logged %d requests of pages", sum.Fetched, pages)
	}
	if sum.RobotsDenied == 0 {
		t.Errorf("crawl status: robots_denied 0; the tree links to the disallowed %s pages", realsite.Disallowed)
	}
	t.Logf("tree %s: farro %d HTML pages in %s (%.0f pages/s), %d requests, %d duplicates, %d robots.txt violations, %d robots-denied; "+
		"wget %d HTML pages in %s (%.0f pages/s), %d requests, %d duplicates, %d violations; set difference %d/%d",
		realsite.DocRoot, fr.Pages(), farroTime.Round(time.Millisecond), float64(fr.Pages())/farroTime.Seconds(), fr.Requests, fr.Duplicates,
		len(fr.Forbidden), sum.RobotsDenied, wg.Pages(), wgetTime.Round(time.Millisecond), float64(wg.Pages())/wgetTime.Seconds(),
		wg.Requests, wg.Duplicates, len(wg.Forbidden), len(onlyFarro), len(onlyWget))
}
