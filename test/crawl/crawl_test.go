package crawl_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/job"
)

// serverTolerance absorbs the scheduling delay between a request's arrival
// and the site server's timestamp of it (the server runs in its own
// process, without the race detector).
const serverTolerance = 15 * time.Millisecond

// TestCrawlEndToEnd crawls the full test site with the real daemons and
// checks, from the site's access log: every in-scope URL within the depth
// limit requested exactly once (the trap stops at the limit, normalization
// variants are one URL), no robots-disallowed or out-of-scope URL
// requested, at most max_in_flight_per_domain requests in flight per
// domain, no two requests to a domain closer than its interval
// (Crawl-delay included), Retry-After honoured. Then farroctl's view:
// status, domains, why, export, domain show and reset.
func TestCrawlEndToEnd(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	opts := testsite.Options{Fanout: 4, Levels: 4}
	s := startSite(t, bin, dir, opts)
	f := newFarro(t, bin, dir)
	f.startWatchdog()
	f.startManager()
	f.startAgents(2, 3)

	const delay = 100 * time.Millisecond
	start := time.Now()
	f.ctl(crawlArgs(s, "site", "--scope", "domain", "--max-depth", "3", "--delay", delay.String(), "--max-in-flight-per-domain", "2",
		"--timeout", "1s", "--max-body-bytes", strconv.Itoa(1<<20), "--max-attempts", "2",
		"--block-cooldown", "1s", "--max-domain-retries", "1", "--unreachable-threshold", "2", "--unreachable-cooldown", "0s", "--unreachable-after", "0s",
		"--retry-backoff", "50ms", "--retry-backoff-max", "200ms")...)
	f.waitState("site", crawl.Done, 90*time.Second)
	elapsed := time.Since(start)

	log := s.log(t)
	exp := s.model.Expected(testsite.ExpectOptions{MaxDepth: 3, MaxBodyBytes: 1 << 20, UserAgent: testsite.UserAgent, ObeyRobots: true,
		RobotsBlocked: map[string]bool{testsite.HostD: true}})
	checkExactlyOnce(t, log, exp, map[string]int{testsite.HostSlow + "/": 2, testsite.HostA + "/error": 2})
	for d, n := range testsite.MaxInFlight(log) {
		if n > 2 {
			t.Errorf("domain %s: %d requests in flight at once, limit 2", d, n)
		}
	}
	interval := func(d string) time.Duration {
		if d == testsite.DomainOfHost(testsite.HostB) {
			return testsite.CrawlDelayB
		}
		return delay
	}
	for _, g := range testsite.CloseGaps(log, interval, serverTolerance) {
		t.Errorf("too close: %s", g)
	}
	checkRetryAfter(t, log)
	for _, r := range log {
		if r.Host == testsite.HostD && r.URI != "/robots.txt" {
			t.Errorf("%s%s requested although its robots.txt answers 500", r.Host, r.URI)
		}
		if r.Host == testsite.HostOut {
			t.Errorf("out-of-scope %s%s requested", r.Host, r.URI)
		}
		if r.UA != testsite.UserAgent {
			t.Errorf("%s%s requested with User-Agent %q", r.Host, r.URI, r.UA)
		}
	}
	t.Logf("%d requests (%d pages) in %s: %.1f pages/s (politeness: %s per domain, Crawl-delay 0.3s on b)",
		len(log), len(pages(log)), elapsed.Round(time.Millisecond), float64(len(pages(log)))/elapsed.Seconds(), delay)

	// farroctl's view.
	// slow.site.test's page is not failed: it stays pending in its
	// domain, unreachable and given up (no rest with --unreachable-cooldown
	// 0s), like d.site.test's seed behind its robots.txt.
	sum := f.status("site")
	if sum.State != crawl.Done || sum.InFlight != 0 || sum.Failed != 0 || sum.RobotsDenied != int64(len(exp.Denied)) ||
		sum.Fetched+1 != int64(len(exp.Fetched)) || sum.Pending != 2 {
		t.Errorf("status: state %s, fetched %d, failed %d, pending %d, robots denied %d, in flight %d; want done, %d fetched, 0 failed, 2 pending (d and slow), %d denied, 0 in flight",
			sum.State, sum.Fetched, sum.Failed, sum.Pending, sum.RobotsDenied, sum.InFlight, len(exp.Fetched)-1, len(exp.Denied))
	}
	if sum.JobStates[job.Queued]+sum.JobStates[job.InProgress]+sum.JobStates[job.Deferred] != 0 {
		t.Errorf("jobs left: %v", sum.JobStates)
	}
	port := ":" + strconv.Itoa(s.model.Port)
	var rows []ctl.DomainSummary
	for _, line := range strings.Split(strings.TrimSpace(f.ctl("domains", "--crawl", "site", "--json")), "\n") {
		var r ctl.DomainSummary
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("domains --json: %v: %s", err, line)
		}
		rows = append(rows, r)
	}
	status := map[string]ctl.DomainSummary{}
	for _, r := range rows {
		status[r.Domain] = r
	}
	for host, want := range map[string]crawl.DomainStatus{testsite.HostA: crawl.DomainExhausted, testsite.HostB: crawl.DomainExhausted,
		testsite.HostC: crawl.DomainExhausted, testsite.HostD: crawl.DomainBlocked, testsite.HostE: crawl.DomainExhausted,
		testsite.HostF: crawl.DomainExhausted, testsite.HostSlow: crawl.DomainUnreachable} {
		if got := status[host+port]; got.Status != want {
			t.Errorf("domain %s: %s (%s %s), want %s", host, got.Status, got.Reason, got.ReasonDetail, want)
		}
	}
	if r := status[testsite.HostD+port]; r.Reason != crawl.ReasonRobotsUnavailable || !r.GaveUp {
		t.Errorf("d.site.test: reason %q gave_up %v, want robots_unavailable, gave up", r.Reason, r.GaveUp)
	}
	if r := status[testsite.HostF+port]; r.Reason != crawl.ReasonRobotsDenied {
		t.Errorf("f.site.test: reason %q, want robots_denied", r.Reason)
	}
	if _, ok := status[testsite.HostWWWA+port]; ok {
		t.Error("www.a.site.test has its own domain; want it folded into a.site.test")
	}
	table := f.ctl("domains", "--crawl", "site")
	if !strings.Contains(table, "reason: robots_unavailable") || !strings.Contains(table, "DOMAIN") {
		t.Errorf("domains table:\n%s", table)
	}

	whys := map[string]string{
		s.url(testsite.HostA, "/private/secret"):     ctl.WhyRobots,
		s.url(testsite.HostOut, "/"):                 ctl.WhyOutOfScope,
		s.url(testsite.HostA, "/p/1/1/1/1"):          ctl.WhyTooDeep,
		s.url(testsite.HostA, "/never/linked"):       ctl.WhyNeverSeen,
		s.url(testsite.HostA, "/p/x/../1#frag"):      ctl.WhyDone,
		s.url(testsite.HostD, "/"):                   ctl.WhyBlocked,
		s.url(testsite.HostSlow, "/"):                ctl.WhyBlocked, // pending in a domain given up
		"mailto:x@y":                                 ctl.WhyInvalid,
		s.url(testsite.HostB, "/nope/deeper"):        ctl.WhyRobots,
		s.url(testsite.HostA, "/trap/4"):             ctl.WhyTooDeep,
		s.url(testsite.HostA, "/trap/3?session=2"):   ctl.WhyDone,
		"HTTP://A.SITE.TEST" + port + "/p/%31/1/%32": ctl.WhyDone,
	}
	for u, want := range whys {
		var a ctl.WhyAnswer
		out := f.ctl("why", "site", u, "--json")
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("why --json: %v: %s", err, out)
		}
		if a.Verdict != want {
			t.Errorf("why %s: %s (%s), want %s", u, a.Verdict, a.Message, want)
		}
	}
	if out := f.ctl("why", "site", s.url(testsite.HostA, "/private/secret")); !strings.Contains(out, "Disallow: /private") {
		t.Errorf("why names no robots rule: %s", out)
	}

	// export: one artifact per finished URL, bodies stored.
	out := f.ctl("crawl", "export", "site")
	n, redirects := 0, 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	seen := map[string]bool{}
	for sc.Scan() {
		var a crawl.Artifact
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("export line: %v", err)
		}
		n++
		if seen[a.NormalizedURL] {
			t.Errorf("export lists %s twice", a.NormalizedURL)
		}
		seen[a.NormalizedURL] = true
		if a.RedirectTo != "" {
			redirects++
		}
		if a.Outcome == crawl.OutcomeFetched {
			if _, err := os.Stat(filepath.Join(f.spool, crawl.Dir, "site", crawl.BodiesDir, a.SHA256[:2], a.SHA256)); err != nil {
				t.Errorf("body of %s: %v", a.NormalizedURL, err)
			}
		}
	}
	// slow.site.test's page is pending: no artifact.
	if want := len(exp.Fetched) - 1 + len(exp.Denied); n != want || redirects != len(exp.Redirect) {
		t.Errorf("export: %d artifacts (%d redirects), want %d (%d)", n, redirects, want, len(exp.Redirect))
	}

	// A domain reset puts d back to pending.
	if out := f.ctl("domain", "reset", "site", testsite.HostD+port); !strings.Contains(out, "pending") {
		t.Errorf("domain reset: %s", out)
	}
	var d crawl.Domain
	if err := json.Unmarshal([]byte(f.ctl("domain", "show", "site", "http://"+testsite.HostD+port+"/x")), &d); err != nil || d.Status != crawl.DomainPending {
		t.Errorf("domain show after reset: %v, %+v", err, d.Status)
	}
	// Resumed, the crawl tries the reset domain again (robots.txt still
	// answers 500) and is done again.
	robotsD := 0
	for _, r := range s.log(t) {
		if r.Host == testsite.HostD {
			robotsD++
		}
	}
	if out := f.ctl("crawl", "resume", "site"); !strings.Contains(out, "done -> running (run 2)") {
		t.Errorf("resume of a done crawl: %s", out)
	}
	f.waitState("site", crawl.Done, 30*time.Second)
	again := 0
	for _, r := range s.log(t) {
		if r.Host == testsite.HostD {
			again++
		}
	}
	if again <= robotsD {
		t.Errorf("d.site.test/robots.txt not requested again after reset and resume (%d, then %d requests)", robotsD, again)
	}
	for _, l := range []string{"crawl ls", "crawl status site"} {
		if out := f.ctl(strings.Fields(l)...); !strings.Contains(out, "site") {
			t.Errorf("%s:\n%s", l, out)
		}
	}
}

// checkExactlyOnce: every expected page requested exactly once (URLs in
// retries: at most that often), and nothing else but robots.txt files.
func checkExactlyOnce(t *testing.T, log []testsite.Request, exp *testsite.Expectation, retries map[string]int) {
	t.Helper()
	counts := testsite.Counts(pages(log))
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
			dup = append(dup, k+" x"+strconv.Itoa(n))
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	sort.Strings(dup)
	if len(missing) > 0 {
		t.Errorf("%d expected URLs never requested: %v", len(missing), missing)
	}
	if len(extra) > 0 {
		t.Errorf("requested but out of scope, too deep or disallowed: %v", extra)
	}
	if len(dup) > 0 {
		t.Errorf("requested more than once: %v", dup)
	}
}

// checkRetryAfter: after c.site.test's 429, nothing reached c before its
// Retry-After was over.
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
		if r.Host == testsite.HostC && r.Start.After(at) && r.Start.Before(at.Add(testsite.RetryAfterC-serverTolerance)) {
			t.Errorf("%s%s requested %s after a 429 with Retry-After %s", r.Host, r.URI, r.Start.Sub(at), testsite.RetryAfterC)
		}
	}
}
