package crawl_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
)

// TestCrawlGrowEndToEnd: with the real daemons, a crawl done on its
// budget leaves its domain exhausted (over budget), crawl set raises the
// budget and the crawl goes on, crawl add-seeds brings a new site in,
// domain reset re-crawls a domain once resumed; every page is fetched
// exactly as often as asked.
func TestCrawlGrowEndToEnd(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	opts := testsite.Options{Plain: true, Fanout: 2, Levels: 2}
	s := startSite(t, bin, dir, opts, "--plain", "--fanout", "2", "--levels", "2")
	f := newFarro(t, bin, dir)
	f.startWatchdog()
	f.startManager()
	f.startAgents(1, 2)
	port := ":" + strconv.Itoa(s.model.Port)
	f.ctl(crawlArgs(s, "g", "--scope", "host", "--delay", "20ms", "--max-pages", "2")...)
	f.waitState("g", crawl.Done, 30*time.Second)
	perURI := func(host string) map[string]int {
		m := map[string]int{}
		for _, r := range pages(s.log(t)) {
			if r.Host == host {
				m[r.URI]++
			}
		}
		return m
	}
	if n := perURI(testsite.HostA); len(n) != 2 {
		t.Fatalf("max-pages 2: fetched %v", n)
	}
	row := ""
	for _, l := range strings.Split(f.ctl("domains", "--crawl", "g"), "\n") {
		if strings.HasPrefix(l, testsite.HostA+port) {
			row = l
		}
	}
	if !strings.Contains(row, "exhausted") || !strings.HasSuffix(row, "over budget") {
		t.Errorf("domain row of a crawl done on its budget: %q", row)
	}
	var ls struct {
		Pending     int64 `json:"pending"`
		PendingURLs int64 `json:"pending_urls"`
	}
	if err := json.Unmarshal([]byte(f.ctl("crawl", "ls", "--json")), &ls); err != nil || ls.Pending == 0 || ls.PendingURLs != ls.Pending {
		t.Errorf("crawl ls --json: %+v %v; want pending_urls equal to pending, not 0", ls, err)
	}

	if out := f.ctl("crawl", "set", "g", "--max-pages", "0"); !strings.Contains(out, "max_pages 2 -> unlimited; done -> running (run 2)") {
		t.Errorf("crawl set: %s", out)
	}
	f.waitState("g", crawl.Done, 30*time.Second)
	a := perURI(testsite.HostA)
	if len(a) < 4 {
		t.Errorf("after crawl set: a fetched %v", a)
	}
	if out := f.ctl("crawl", "add-seeds", "g", s.url(testsite.HostB, "/")); !strings.Contains(out, "1 seed(s) added") {
		t.Errorf("crawl add-seeds: %s", out)
	}
	f.waitState("g", crawl.Done, 30*time.Second)
	b := perURI(testsite.HostB)
	if len(b) < 2 || b["/"] != 1 {
		t.Errorf("after add-seeds: b fetched %v", b)
	}
	if out := f.ctl("domain", "reset", "g", testsite.HostA+port, "--reason", "check"); !strings.Contains(out, "fetched again once the crawl is resumed") {
		t.Errorf("domain reset of a done crawl's domain: %s", out)
	}
	f.ctl("crawl", "resume", "g")
	deadline := time.Now().Add(30 * time.Second)
	for {
		again := perURI(testsite.HostA)
		ok := len(again) == len(a)
		for u := range a {
			ok = ok && again[u] == 2
		}
		if ok && f.state("g").State == crawl.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after domain reset and resume: a fetched %v, want each of %v twice", again, a)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for u, n := range perURI(testsite.HostB) {
		if n != 1 {
			t.Errorf("b%s fetched %d times", u, n)
		}
	}
}
