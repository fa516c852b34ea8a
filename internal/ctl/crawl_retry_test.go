package ctl_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
)

// retryCrawl makes a done crawl of a.test and b.test with the given
// outcome lines ("URL OUTCOME", oldest first).
func (e *env) retryCrawl(name string, lines ...string) *crawl.Store {
	e.t.Helper()
	e.newCrawlWithDomains(name, "a.test", "b.test")
	st, err := crawl.Open(e.s, name)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := st.Update(func(c *crawl.Crawl) error { c.State = crawl.Done; return nil }); err != nil {
		e.t.Fatal(err)
	}
	var buf []byte
	for _, l := range lines {
		u, out, _ := strings.Cut(l, " ")
		dom := strings.Split(strings.TrimPrefix(u, "http://"), "/")[0]
		b, _ := json.Marshal(crawl.Outcome{Time: time.Now().UTC(), URL: u, Domain: dom, JobID: crawl.FetchJobID(name, u), Outcome: out})
		buf = append(append(buf, b...), '\n')
	}
	if err := os.WriteFile(st.Path(crawl.OutcomesFile), buf, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return st
}

func retryRequests(t *testing.T, st *crawl.Store) []crawl.Request {
	t.Helper()
	ents, _ := os.ReadDir(st.Path(crawl.RequestsDir))
	var out []crawl.Request
	for _, en := range ents {
		b, err := os.ReadFile(filepath.Join(st.Path(crawl.RequestsDir), en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var r crawl.Request
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestCrawlRetry: crawl retry asks the frontier to queue the URLs whose
// last outcome is killed (or failed), of one domain if asked, and makes a
// done crawl run again; bad input is a usage error that changes nothing.
func TestCrawlRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	st := e.retryCrawl("r", "http://a.test/1 killed", "http://a.test/2 failed", "http://b.test/1 killed",
		"http://a.test/3 killed", "http://a.test/3 fetched")

	err := e.ctl("").CrawlRetry(ctl.CrawlRetryOptions{Name: "r", States: []string{"fetched"}})
	var ce *ctl.Error
	if !errors.As(err, &ce) || ce.Code != ctl.ExitUsage || !strings.Contains(err.Error(), `--state "fetched"`) {
		t.Fatalf("--state fetched: %v", err)
	}
	if err := e.ctl("").CrawlRetry(ctl.CrawlRetryOptions{Name: "r", Domain: "c.test"}); err == nil {
		t.Fatal("unknown domain accepted")
	}
	if rs := retryRequests(t, st); len(rs) != 0 {
		t.Fatalf("requests after refused input: %+v", rs)
	}

	if err := e.ctl("").CrawlRetry(ctl.CrawlRetryOptions{Name: "r", States: []string{"killed"}, Domain: "a.test"}); err != nil {
		t.Fatal(err)
	}
	if out := e.stdout.String(); !strings.Contains(out, "r: 1 URL(s) of a.test (last outcome killed) queued again") || !strings.Contains(out, "done -> running (run 2)") {
		t.Errorf("output: %q", out)
	}
	rs := retryRequests(t, st)
	if len(rs) != 1 || rs[0].Op != crawl.OpRetry || rs[0].Domain != "a.test" || len(rs[0].States) != 1 || rs[0].States[0] != "killed" {
		t.Fatalf("requests: %+v", rs)
	}
	cr, err := st.Load()
	if err != nil || cr.State != crawl.Running || cr.Run != 2 {
		t.Fatalf("crawl after retry: %+v %v", cr, err)
	}

	// Default states: failed and killed, every domain.
	if err := e.ctl("").CrawlRetry(ctl.CrawlRetryOptions{Name: "r"}); err != nil {
		t.Fatal(err)
	}
	if out := e.stdout.String(); !strings.Contains(out, "r: 3 URL(s) (last outcome failed or killed)") {
		t.Errorf("output: %q", out)
	}

	// Nothing to retry: no request.
	e.retryCrawl("clean", "http://a.test/1 fetched")
	if err := e.ctl("").CrawlRetry(ctl.CrawlRetryOptions{Name: "clean"}); err != nil {
		t.Fatal(err)
	}
	if out := e.stdout.String(); !strings.Contains(out, "nothing to retry") {
		t.Errorf("output: %q", out)
	}

	// A cancelled crawl refuses.
	cst := e.retryCrawl("gone", "http://a.test/1 killed")
	if _, err := cst.Update(func(c *crawl.Crawl) error { c.State = crawl.Cancelled; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl("").CrawlRetry(ctl.CrawlRetryOptions{Name: "gone"}); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("cancelled crawl: %v", err)
	}
}
