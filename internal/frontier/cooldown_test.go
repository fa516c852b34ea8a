package frontier_test

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// TestCooldownPerReason: a domain judged blocked rests the cooldown of
// its reason (403: forbidden_cooldown, 429: rate_limited_cooldown), one
// judged unreachable unreachable_cooldown; each differs from
// block_cooldown here, so a cooldown taken from the wrong setting shows.
func TestCooldownPerReason(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		switch {
		case r.URL.Path == "/robots.txt":
			http.NotFound(w, r)
		case r.URL.Path == "/":
			w.Header().Set("Content-Type", "text/html")
			var b strings.Builder
			for i := 1; i <= 4; i++ {
				fmt.Fprintf(&b, `<a href="/p%d">p</a>`, i)
			}
			fmt.Fprint(w, b.String())
		case host == "forbidden.test":
			w.WriteHeader(http.StatusForbidden)
		default:
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	// Nothing listens on a closed port: connections are refused.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := strconv.Itoa(dead.Addr().(*net.TCPAddr).Port)
	dead.Close()

	e := startEnv(t, 2)
	defer e.stop()
	c := crawl.New("cd")
	c.Seeds = []crawl.Seed{{URL: "http://forbidden.test:" + port + "/"}, {URL: "http://limited.test:" + port + "/"}, {URL: "http://down.test:" + deadPort + "/"}}
	c.Resolve = map[string]string{"forbidden.test:" + port: "127.0.0.1", "limited.test:" + port: "127.0.0.1", "down.test:" + deadPort: "127.0.0.1"}
	c.AllowPrivate = true
	c.ObeyRobots, c.Sitemaps = false, false // an unreachable robots.txt blocks its domain: the network failures must come from pages
	c.Delay = crawl.Duration(10 * time.Millisecond)
	c.Timeout, c.ConnectTimeout = crawl.Duration(time.Second), crawl.Duration(500*time.Millisecond)
	c.BlockThreshold, c.UnreachableThreshold = 2, 2
	c.UnreachableAfter = 0 // judged on the count alone
	c.RetryBackoff, c.RetryBackoffMax = crawl.Duration(20*time.Millisecond), crawl.Duration(50*time.Millisecond)
	c.BlockCooldown = crawl.Duration(time.Minute)
	c.ForbiddenCooldown = crawl.Duration(3 * time.Hour)
	c.RateLimitedCooldown = crawl.Duration(2 * time.Hour)
	c.UnreachableCooldown = crawl.Duration(5 * time.Hour)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, "cd")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		status   crawl.DomainStatus
		reason   string
		cooldown time.Duration
	}{
		"forbidden.test:" + port: {crawl.DomainBlocked, crawl.ReasonForbidden, 3 * time.Hour},
		"limited.test:" + port:   {crawl.DomainBlocked, crawl.ReasonRateLimited, 2 * time.Hour},
		"down.test:" + deadPort:  {crawl.DomainUnreachable, crawl.ReasonConnectFailure, 5 * time.Hour},
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		done := 0
		for name, w := range want {
			if d, err := st.LoadDomain(name); err == nil && d.Status == w.status {
				done++
			}
		}
		if done == len(want) {
			break
		}
		if time.Now().After(deadline) {
			doms, _ := st.Domains()
			for _, d := range doms {
				t.Logf("%s: %s %s %s", d.Domain, d.Status, d.Reason, d.ReasonDetail)
			}
			t.Fatal("domains not judged")
		}
	}
	for name, w := range want {
		d, err := st.LoadDomain(name)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason != w.reason || d.NextCrawlAfter == nil || d.FirstBlockedAt == nil {
			t.Errorf("%s: %s %q, next %v; want %s, a cooldown", name, d.Status, d.Reason, d.NextCrawlAfter, w.reason)
			continue
		}
		if got := d.NextCrawlAfter.Sub(*d.FirstBlockedAt); got < w.cooldown-time.Second || got > w.cooldown+time.Second {
			t.Errorf("%s (%s): rests %s, want %s", name, d.Reason, got, w.cooldown)
		}
	}
}
