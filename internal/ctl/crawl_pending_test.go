package ctl_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/crawl"
)

// TestCrawlLsPendingFooter: crawl ls ends with the URLs pending in the
// running crawls (and the paused ones apart), read from the count each
// crawl's frontier keeps in frontier.json, which crawl ls --json gives
// as pending_urls.
func TestCrawlLsPendingFooter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		name    string
		state   crawl.State
		pending int64
	}{{"a", crawl.Running, 7}, {"b", crawl.Running, 5}, {"c", crawl.Paused, 3}, {"d", crawl.Done, 2}} {
		e.newCrawlWithDomains(c.name, c.name+".example")
		st, _ := crawl.Open(e.s, c.name)
		if _, err := st.Update(func(cr *crawl.Crawl) error { cr.State = c.state; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := st.WriteFrontier(&crawl.Frontier{Seeded: true, PendingURLs: c.pending}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.ctl("").CrawlList(false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(e.stdout.String()), "\n")
	if last := lines[len(lines)-1]; last != "pending URLs: 12 in 2 running crawl(s); 3 more in 1 paused" {
		t.Errorf("crawl ls footer %q\n%s", last, e.stdout)
	}
	if err := e.ctl("").CrawlList(true); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, l := range strings.Split(strings.TrimSpace(e.stdout.String()), "\n") {
		var r struct {
			Name    string `json:"name"`
			Pending *int64 `json:"pending_urls"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Pending == nil {
			t.Fatalf("crawl ls --json line %q: %v", l, err)
		}
		got[r.Name] = *r.Pending
	}
	if got["a"] != 7 || got["b"] != 5 || got["c"] != 3 || got["d"] != 2 {
		t.Errorf("crawl ls --json pending_urls: %v", got)
	}
}
