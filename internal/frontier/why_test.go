package frontier_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testsite"
)

// TestWhyWaiting: a URL queued behind others in a polite domain is
// "waiting", with its place in the queue; an over-budget one is
// "over_budget".
func TestWhyWaiting(t *testing.T) {
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 4, Levels: 2})
	defer site.Close()
	e := startEnv(t, 2)
	c := plainCrawl(site, "why")
	c.Seeds = c.Seeds[:1]
	c.Delay = crawl.Duration(30 * time.Second) // the root, then nothing for a while
	c.MaxInFlightPerDomain = 1
	c.ObeyRobots = false // robots.txt would be the first request
	_ = c.Validate()
	st, _ := crawl.Open(e.spool, "why")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	why := func(u string) ctl.WhyAnswer {
		var out bytes.Buffer
		cc := &ctl.Ctl{Root: e.spool.Root, Stdout: &out, Stderr: &out}
		if err := cc.Why("why", u, true); err != nil {
			t.Fatal(err)
		}
		var a ctl.WhyAnswer
		if err := json.Unmarshal(out.Bytes(), &a); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return a
	}
	deadline := time.Now().Add(20 * time.Second)
	var a ctl.WhyAnswer
	for {
		a = why(site.URL(testsite.HostA, "/p/3"))
		if a.Verdict == ctl.WhyWaiting || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a.Verdict != ctl.WhyWaiting || a.Ahead == nil || *a.Ahead != 2 || a.Depth == nil || *a.Depth != 1 {
		t.Errorf("why /p/3: %+v (want waiting, 2 ahead, depth 1)", a)
	}
	if a := why(site.URL(testsite.HostA, "/")); a.Verdict != ctl.WhyDone {
		t.Errorf("why /: %+v", a)
	}
	// An operator's reset, applied by the running frontier: its log line
	// names who asked as requested_by, since actor is already the daemon's
	// (the cluster checks every line strictly when the test ends).
	var out bytes.Buffer
	if err := (&ctl.Ctl{Root: e.spool.Root, Stdout: &out, Stderr: &out}).DomainReset("why", site.URL(testsite.HostA, "/")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "reset requested") {
		t.Fatalf("reset not sent to the frontier: %s", out.String())
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if names, err := os.ReadDir(st.Path(crawl.RequestsDir)); err == nil && len(names) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the frontier did not apply the reset within 10s")
		}
	}
	if _, err := st.Update(func(c *crawl.Crawl) error { c.MaxPages = 1; return nil }); err != nil {
		t.Fatal(err)
	}
	if a := why(site.URL(testsite.HostA, "/p/3")); a.Verdict != ctl.WhyOverBudget {
		t.Errorf("why /p/3 over budget: %+v", a)
	}

}
