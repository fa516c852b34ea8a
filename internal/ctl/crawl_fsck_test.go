package ctl_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
)

// TestCrawlFsck builds a crawl's records by hand, with what a crash
// leaves (an outcome and a links line written twice for one job, a
// failed release put back, a retry waiting), and checks that crawl fsck
// finds the counters that agree with them equal, reports one that does
// not (exit 1), and refuses a crawl a frontier drives.
func TestCrawlFsck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.newCrawlWithDomains("fk", "a.test")
	st, err := crawl.Open(e.s, "fk")
	if err != nil {
		t.Fatal(err)
	}
	u := func(p string) string { return "http://a.test" + p }
	id := func(p string) string { return crawl.FetchJobID("fk", u(p)) }
	now := time.Now().UTC()
	entries := []crawl.Entry{
		{URL: u("/"), At: now}, {URL: u("/x"), At: now}, {URL: u("/y"), At: now}, {URL: u("/z"), At: now},
		{URL: u("/y"), At: now, Requeued: true}, // consumed
		{URL: u("/x"), At: now, Try: 1},         // pending: /x was released
	}
	if err := os.MkdirAll(st.QueueDir("a.test"), 0o755); err != nil {
		t.Fatal(err)
	}
	size, err := crawl.AppendEntries(filepath.Join(st.QueueDir("a.test"), "0_0.jsonl"), entries)
	if err != nil {
		t.Fatal(err)
	}
	d, err := st.LoadDomain("a.test")
	if err != nil {
		t.Fatal(err)
	}
	seg := d.Segment(0, 0)
	seg.Size, seg.Count, seg.Consumed, seg.Offset = size, 6, 5, 0
	d.PagesDiscovered, d.PagesReleased, d.PagesCrawled, d.PagesNew, d.RobotsDenied = 4, 3, 1, 1, 2
	d.StatusCounts["200"] = 1
	if err := st.WriteDomain(d, true); err != nil {
		t.Fatal(err)
	}
	lines := func(file string, vs ...any) {
		var b []byte
		for _, v := range vs {
			j, _ := json.Marshal(v)
			b = append(append(b, j...), '\n')
		}
		if err := os.WriteFile(st.Path(file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lines(crawl.OutcomesFile,
		crawl.Outcome{URL: u("/"), Domain: "a.test", JobID: id("/"), Outcome: crawl.OutcomeKilled},
		crawl.Outcome{URL: u("/"), Domain: "a.test", JobID: id("/"), Outcome: crawl.OutcomeFetched, HTTPStatus: 200},
		crawl.Outcome{URL: u("/y"), Domain: "a.test", JobID: id("/y"), Outcome: crawl.OutcomeRefused, ErrorCode: crawl.ErrCodeRobots},
		crawl.Outcome{URL: u("/z"), Domain: "a.test", JobID: id("/z"), Outcome: crawl.OutcomeRobotsDenied})
	lines(crawl.LinksFile,
		crawl.LinkTally{JobID: crawl.SeedsTallyID, Accepted: 1},
		crawl.LinkTally{JobID: id("/"), OutOfScope: 1, Accepted: 4},
		crawl.LinkTally{JobID: id("/"), OutOfScope: 1, Accepted: 4})
	if err := st.WriteFrontier(&crawl.Frontier{Seeded: true, Tallied: true, OutOfScope: 1, Duplicates: 1}); err != nil {
		t.Fatal(err)
	}

	if err := e.ctl("").CrawlFsck("fk", false); err != nil {
		t.Fatalf("crawl fsck of agreeing counters: %v\n%s", err, e.stdout)
	}
	if !strings.Contains(e.stdout.String(), "fk: every counter equals a recount") {
		t.Errorf("crawl fsck printed %q", e.stdout)
	}

	d.PagesCrawled = 2
	if err := st.WriteDomain(d, true); err != nil {
		t.Fatal(err)
	}
	err = e.ctl("").CrawlFsck("fk", true)
	if ctl.ExitCode(err) != ctl.ExitFail {
		t.Fatalf("crawl fsck of a wrong counter: exit %d (%v), want 1", ctl.ExitCode(err), err)
	}
	var r ctl.CrawlFsckReport
	if jerr := json.Unmarshal(e.stdout.Bytes(), &r); jerr != nil {
		t.Fatalf("%v: %s", jerr, e.stdout)
	}
	if r.Equal || len(r.Diffs) != 1 || r.Diffs[0] != "domain a.test pages_crawled: stored 2, recount 1" {
		t.Errorf("crawl fsck --json: equal %v, diffs %q", r.Equal, r.Diffs)
	}

	l, err := crawl.TryFlock(st.Path(crawl.FrontierLock))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	err = e.ctl("").CrawlFsck("fk", false)
	if ctl.ExitCode(err) != ctl.ExitFail || err == nil || !strings.Contains(err.Error(), "a frontier is driving it") {
		t.Errorf("crawl fsck of a driven crawl: %v", err)
	}
}
