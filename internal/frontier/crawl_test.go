package frontier_test

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/frontier"
	"github.com/farro-dev/farro/internal/testcluster"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/job"
)

// env runs a frontier, a manager and an agent in this process over a
// temp spool (internal/testcluster).
type env struct {
	t     *testing.T
	spool *job.Spool
	fr    *frontier.Frontier
	c     *testcluster.Cluster
}

func startEnv(t *testing.T, concurrency int) *env {
	t.Helper()
	return startEnvAt(t, t.TempDir(), concurrency)
}

func startEnvAt(t *testing.T, dir string, concurrency int) *env {
	t.Helper()
	s, err := job.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := testcluster.Start(t, s, testcluster.Config{Concurrency: concurrency, Rescan: 2 * time.Second, Poll: 50 * time.Millisecond})
	return &env{t: t, spool: s, fr: c.Frontier, c: c}
}

func (e *env) stop() { e.c.Stop() }

func testCrawl(site *testsite.Site, name string) *crawl.Crawl {
	c := crawl.New(name)
	c.Seeds = []crawl.Seed{{URL: site.URL(testsite.HostA, "/")}}
	c.Scope = crawl.ScopeDomain
	c.MaxDepth = 3
	c.Delay = crawl.Duration(100 * time.Millisecond)
	c.MaxInFlightPerDomain = 2
	c.UserAgent = testsite.UserAgent
	c.AllowPrivate = true
	c.Resolve = map[string]string{}
	for _, r := range site.Resolve() {
		hp, addr, _ := crawl.ParseResolve(r)
		c.Resolve[hp] = addr
	}
	c.Timeout = crawl.Duration(time.Second)
	c.MaxBodyBytes = 1 << 20
	c.MaxAttempts = 2
	c.BlockCooldown = crawl.Duration(time.Second)
	c.MaxDomainRetries = 1
	c.UnreachableThreshold = 2
	c.UnreachableAfter = 0
	// No rest: an unreachable domain is given up at once (its URL stays
	// pending); 5xx and network failures are retried soon.
	c.UnreachableCooldown = 0
	c.RetryBackoff, c.RetryBackoffMax = crawl.Duration(50*time.Millisecond), crawl.Duration(200*time.Millisecond)
	return c
}

func waitState(t *testing.T, st *crawl.Store, want crawl.State, timeout time.Duration) *crawl.Crawl {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, err := st.Load()
		if err == nil && c.State == want {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl not %s after %s (state %v, err %v)", want, timeout, c.State, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCrawlSite crawls the test site in-process and checks, from the
// server's access log, exactly-once fetching of the expected URLs,
// robots.txt, scope, depth and politeness.
func TestCrawlSite(t *testing.T) {
	site := testsite.Start(testsite.Options{Fanout: 4, Levels: 4, TooSlowDelay: 3 * time.Second})
	defer site.Close()
	e := startEnv(t, 4)
	cfg := testCrawl(site, "site")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, "site")
	start := time.Now()
	if err := st.Create(cfg); err != nil {
		t.Fatal(err)
	}
	// While the crawl runs, the metrics snapshot counts its domains under
	// its name, with every status present, and no other crawl.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		all, total := e.fr.DomainCounts(), 0
		got := all[st.Name]
		for _, n := range got {
			total += n
		}
		if total > 0 && len(got) == len(crawl.DomainStatuses) && len(all) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DomainCounts %v: no domain counted while the crawl runs", got)
		}
	}
	waitState(t, st, crawl.Done, 90*time.Second)
	elapsed := time.Since(start)
	log := site.Log()
	exp := site.Expected(testsite.ExpectOptions{MaxDepth: 3, MaxBodyBytes: cfg.MaxBodyBytes, UserAgent: cfg.UserAgent, ObeyRobots: true,
		RobotsBlocked: map[string]bool{testsite.HostD: true}})
	checkCrawl(t, log, exp, map[string]int{testsite.HostSlow + "/": 2, testsite.HostA + "/error": cfg.MaxAttempts})
	checkPoliteness(t, log, cfg)
	checkClientSpacing(t, e.spool, cfg)
	checkRetryAfter(t, log)
	var pages int
	for _, r := range log {
		if !testsite.IsRobots(r) {
			pages++
		}
	}
	t.Logf("%d requests (%d pages) in %s: %.1f pages/s", len(log), pages, elapsed.Round(time.Millisecond), float64(pages)/elapsed.Seconds())

	doms, err := st.Domains()
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]crawl.DomainStatus{}
	for _, d := range doms {
		status[d.Domain] = d.Status
		gaveUp := (d.Status == crawl.DomainBlocked || d.Status == crawl.DomainUnreachable) && d.NextCrawlAfter == nil
		if len(d.InFlight) != 0 || (d.Pending() != 0 && !gaveUp) {
			t.Errorf("domain %s: %d in flight, %d pending after done", d.Domain, len(d.InFlight), d.Pending())
		}
	}
	port := ":" + itoa(site.Port)
	want := map[string]crawl.DomainStatus{
		testsite.HostA + port: crawl.DomainExhausted, testsite.HostB + port: crawl.DomainExhausted,
		testsite.HostD + port: crawl.DomainBlocked, testsite.HostF + port: crawl.DomainExhausted,
		testsite.HostSlow + port: crawl.DomainUnreachable,
	}
	for d, s := range want {
		if status[d] != s {
			t.Errorf("domain %s is %q, want %q", d, status[d], s)
		}
	}
	if _, ok := status[testsite.HostWWWA+port]; ok {
		t.Errorf("www.a.site.test is a domain of its own; want it folded into a.site.test")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// checkRetryAfter checks that after c.site.test's 429 nothing reached c
// before its Retry-After was over.
func checkRetryAfter(t *testing.T, log []testsite.Request) {
	t.Helper()
	var at time.Time
	for _, r := range log {
		if r.Host == testsite.HostC && r.URI == "/limited" && r.Status == 429 {
			at = r.End
		}
	}
	if at.IsZero() {
		t.Error("c.site.test/limited never answered 429")
		return
	}
	for _, r := range log {
		if r.Host == testsite.HostC && r.Start.After(at) && r.Start.Before(at.Add(testsite.RetryAfterC-5*time.Millisecond)) {
			t.Errorf("%s%s requested %s after a 429 with Retry-After %s", r.Host, r.URI, r.Start.Sub(at), testsite.RetryAfterC)
		}
	}
}

// checkCrawl compares the requests with the expectation: every expected
// page requested exactly once (retried URLs: at most retries[key] times),
// nothing else but robots.txt files.
func checkCrawl(t *testing.T, log []testsite.Request, exp *testsite.Expectation, retries map[string]int) {
	t.Helper()
	counts := map[string]int{}
	for _, r := range log {
		if testsite.IsRobots(r) {
			continue
		}
		counts[r.Host+r.URI]++
	}
	var missing, extra, dup []string
	for k := range exp.Fetched {
		if counts[k] == 0 {
			missing = append(missing, k)
		}
	}
	for k, n := range counts {
		switch {
		case !exp.Fetched[k]:
			extra = append(extra, k)
		case n > 1 && n > retries[k]:
			dup = append(dup, k+" x"+itoa(n))
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	sort.Strings(dup)
	if len(missing) > 0 {
		t.Errorf("expected URLs never requested: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("URLs requested that must not be (robots, scope, depth): %v", extra)
	}
	if len(dup) > 0 {
		t.Errorf("URLs requested more than once: %v", dup)
	}
	for k := range exp.Denied {
		if counts[k] > 0 {
			t.Errorf("robots-disallowed %s requested", k)
		}
	}
}

// checkClientSpacing checks the intervals from the fetchers' side: the
// times the requests were written (artifacts' fetched_at), exactly.
func checkClientSpacing(t *testing.T, s *job.Spool, cfg *crawl.Crawl) {
	t.Helper()
	dirs, _ := os.ReadDir(s.StateDir(job.Succeeded))
	by := map[string][]time.Time{}
	for _, de := range dirs {
		var a struct {
			Domain    string    `json:"domain"`
			Origin    string    `json:"origin"`
			FetchedAt time.Time `json:"fetched_at"`
		}
		if crawl.ReadResult(filepath.Join(s.StateDir(job.Succeeded), de.Name()), &a) != nil || a.FetchedAt.IsZero() {
			continue
		}
		d := a.Domain
		if d == "" {
			d, _, _ = crawl.DomainOf(a.Origin + "/")
		}
		by[d] = append(by[d], a.FetchedAt)
	}
	for d, ts := range by {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		lim := cfg.Delay.D()
		if strings.HasPrefix(d, testsite.HostB) {
			lim = testsite.CrawlDelayB
		}
		for i := 1; i < len(ts); i++ {
			if g := ts[i].Sub(ts[i-1]); g < lim {
				t.Errorf("client side: requests to %s written %s apart (limit %s)", d, g, lim)
			}
		}
	}
}

// checkPoliteness checks the per-domain in-flight limit and intervals.
func checkPoliteness(t *testing.T, log []testsite.Request, cfg *crawl.Crawl) {
	t.Helper()
	for d, n := range testsite.MaxInFlight(log) {
		if n > cfg.MaxInFlightPerDomain {
			t.Errorf("domain %s had %d requests in flight at once, limit %d", d, n, cfg.MaxInFlightPerDomain)
		}
	}
	interval := func(d string) time.Duration {
		if d == testsite.DomainOfHost(testsite.HostB) {
			return testsite.CrawlDelayB
		}
		return cfg.Delay.D()
	}
	// Arrivals are the kernel's receive timestamps (SO_TIMESTAMPNS), not
	// when the server's goroutines ran: a small tolerance is enough.
	for _, g := range testsite.CloseGaps(log, interval, 15*time.Millisecond) {
		t.Errorf("too close: %s", g)
	}
}
