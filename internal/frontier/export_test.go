package frontier_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testsite"
)

// TestExportReferrerDepth crawls b.site.test (robots.txt disallows /nope)
// to depth 1 and checks `crawl export`: every row has referrer and depth;
// fetched rows have fetched_at; the robots-denied rows have none (nothing
// was fetched), and name the page that linked them. One fetched job is
// then removed from the spool (retention): its row, from the outcome
// log, keeps its referrer and depth.
func TestExportReferrerDepth(t *testing.T) {
	site := testsite.Start(testsite.Options{Fanout: 2, Levels: 2})
	defer site.Close()
	e := startEnv(t, 2)
	defer e.stop()
	c := testCrawl(site, "exp")
	root := site.URL(testsite.HostB, "/")
	c.Seeds = []crawl.Seed{{URL: root}}
	c.Scope = crawl.ScopeHost
	c.MaxDepth = 1
	c.Delay = 0
	c.MaxCrawlDelay = crawl.Duration(50 * time.Millisecond) // b's Crawl-delay 0.3, capped
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	root = c.Seeds[0].URL
	st, _ := crawl.Open(e.spool, "exp")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)

	export := func() map[string]map[string]any {
		t.Helper()
		var out bytes.Buffer
		if err := (&ctl.Ctl{Root: e.spool.Root, Stdout: &out, Stderr: &out}).CrawlExport("exp"); err != nil {
			t.Fatal(err)
		}
		rows := map[string]map[string]any{}
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			var r map[string]any
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%v: %s", err, sc.Text())
			}
			u, _ := r["normalized_url"].(string)
			rows[strings.TrimPrefix(u, strings.TrimSuffix(root, "/"))] = r
		}
		return rows
	}
	check := func(rows map[string]map[string]any, path, outcome, referrer string, depth float64, fetched bool) {
		t.Helper()
		r := rows[path]
		if r == nil {
			t.Errorf("no export row for %s (rows: %d)", path, len(rows))
			return
		}
		if r["outcome"] != outcome || r["depth"] != depth {
			t.Errorf("%s: outcome %v depth %v, want %s %v", path, r["outcome"], r["depth"], outcome, depth)
		}
		if ref, ok := r["referrer"]; !ok || ref != referrer {
			t.Errorf("%s: referrer %v (present %v), want %q", path, ref, ok, referrer)
		}
		fa, has := r["fetched_at"].(string)
		switch {
		case fetched && (!has || strings.HasPrefix(fa, "0001-")):
			t.Errorf("%s: fetched_at %q, want the request's time", path, fa)
		case !fetched && has:
			t.Errorf("%s: fetched_at %q where nothing was fetched", path, fa)
		}
	}
	rows := export()
	check(rows, "/", crawl.OutcomeFetched, "", 0, true)
	check(rows, "/b/1", crawl.OutcomeFetched, root, 1, true)
	check(rows, "/landing", crawl.OutcomeFetched, root, 1, true)
	check(rows, "/nope", crawl.OutcomeRobotsDenied, root, 1, false)
	check(rows, "/nope/deeper", crawl.OutcomeRobotsDenied, root, 1, false)
	for p, r := range rows {
		for _, k := range []string{"referrer", "depth"} {
			if _, ok := r[k]; !ok {
				t.Errorf("%s: no %s in %v", p, k, r)
			}
		}
	}

	// The job of /b/2 leaves the spool: its row comes from the outcome log.
	id := crawl.FetchJobID("exp", root+"b/2")
	if _, err := e.spool.Remove(id, "farroctl/test"); err != nil {
		t.Fatalf("remove %s: %v", id, err)
	}
	check(export(), "/b/2", crawl.OutcomeFetched, root, 1, true)
}
