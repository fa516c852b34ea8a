package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/job"
)

// TestCrawlGrowCommands: crawl set, crawl add-seeds and domain reset
// take their flags before or after the arguments, write crawl.json or
// their requests for the frontier, and refuse bad input with one line
// (exit 2) and nothing written.
func TestCrawlGrowCommands(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "farroctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := runner{bin: bin}
	spool := newSpool(t)
	if res := r.run(t, spool, "", "crawl", "start", "g", "--seed", "http://a.test/", "--max-pages", "3"); res.code != 0 {
		t.Fatalf("crawl start: %+v", res)
	}
	s, err := job.Open(spool)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(s, "g")
	load := func() *crawl.Crawl {
		t.Helper()
		cr, err := st.Load()
		if err != nil {
			t.Fatal(err)
		}
		return cr
	}
	requests := func(op string) []crawl.Request {
		t.Helper()
		ents, _ := os.ReadDir(st.Path(crawl.RequestsDir))
		var out []crawl.Request
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(st.Path(crawl.RequestsDir), e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			var rq crawl.Request
			if err := json.Unmarshal(b, &rq); err != nil {
				t.Fatal(err)
			}
			if rq.Op == op {
				out = append(out, rq)
			}
		}
		return out
	}

	res := r.run(t, spool, "", "crawl", "set", "g", "--max-pages", "10", "--max-depth", "5")
	if res.code != 0 || !strings.Contains(res.stdout, "max_pages 3 -> 10, max_depth 3 -> 5") {
		t.Errorf("crawl set: %+v", res)
	}
	if cr := load(); cr.MaxPages != 10 || cr.MaxDepth != 5 || cr.MaxPagesPerDomain != 0 {
		t.Errorf("crawl.json after set: max_pages %d, max_depth %d, per domain %d", cr.MaxPages, cr.MaxDepth, cr.MaxPagesPerDomain)
	}
	if res := r.run(t, spool, "", "crawl", "set", "--max-pages", "0", "g"); res.code != 0 || !strings.Contains(res.stdout, "max_pages 10 -> unlimited") {
		t.Errorf("crawl set --max-pages 0: %+v", res)
	}
	for _, args := range [][]string{
		{"crawl", "set", "g"},
		{"crawl", "set", "g", "--max-depth", "2"},
		{"crawl", "set", "g", "--max-pages", "-1"},
		{"crawl", "add-seeds", "g"},
		{"crawl", "add-seeds", "g", "ftp://a.test/"},
		{"crawl", "add-seeds", "g", "http://127.0.0.1/"},
		{"domain", "reset", "g", "a.test", "--reason", "two\nlines"},
	} {
		before := load()
		res := r.run(t, spool, "", args...)
		if res.code != 2 || !oneErrorLine(res.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, res.code, res.stderr)
		}
		if after := load(); after.MaxDepth != before.MaxDepth || len(after.Seeds) != len(before.Seeds) || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Errorf("%v changed crawl.json", args)
		}
	}

	res = r.run(t, spool, "", "crawl", "add-seeds", "g", "http://b.test/", "http://A.test/", "--priority", "3")
	if res.code != 0 || !strings.Contains(res.stdout, "1 seed(s) added, 1 already seeds") {
		t.Errorf("crawl add-seeds: %+v", res)
	}
	if cr := load(); len(cr.Seeds) != 2 || cr.Seeds[1] != (crawl.Seed{URL: "http://b.test/", Priority: 3}) {
		t.Errorf("seeds after add-seeds: %+v", cr.Seeds)
	}
	if rq := requests(crawl.OpAddSeeds); len(rq) != 1 || len(rq[0].Seeds) != 1 || rq[0].Seeds[0].URL != "http://b.test/" {
		t.Errorf("add_seeds requests: %+v", rq)
	}

	if err := st.WriteDomain(crawl.NewDomain("a.test", "a.test", time.Now().UTC()), true); err != nil {
		t.Fatal(err)
	}
	res = r.run(t, spool, "", "domain", "reset", "g", "a.test", "--reason", "site moved")
	if res.code != 0 || !strings.Contains(res.stdout, "a.test: pending -> pending (reset); its pages are fetched again") {
		t.Errorf("domain reset: %+v", res)
	}
	d, err := st.LoadDomain("a.test")
	if err != nil || d.Reason != crawl.ReasonReset || d.ReasonDetail != "by farroctl: site moved" {
		t.Errorf("domain after reset: %+v %v", d, err)
	}
	if rq := requests(crawl.OpRecrawl); len(rq) != 1 || rq[0].Domain != "a.test" || rq[0].Reason != "site moved" {
		t.Errorf("recrawl requests: %+v", rq)
	}
	res = r.run(t, spool, "", "domain", "reset", "--no-recrawl", "g", "a.test")
	if res.code != 0 || !strings.Contains(res.stdout, "not fetched again") || len(requests(crawl.OpRecrawl)) != 1 {
		t.Errorf("domain reset --no-recrawl: %+v", res)
	}
}
