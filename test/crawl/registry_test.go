package crawl_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/job"
)

// TestDomainRegistryRuns runs the stop-and-resume and seeds
// scenarios with the real daemons, checked from the site's access log.
//
// Run 1 of crawl r1 (seeds A, B, C; three pages per domain per run) leaves
// A active (its per-run budget reached), B exhausted (e.site.test: two
// pages), C blocked (wall.site.test: a login wall; given up for the
// crawl, resting the login-wall cooldown in the registry) and D pending
// (b.site.test, added while the crawl is paused, not reached). Run 2
// (resume) continues A with pages not fetched before, sends nothing to B
// or C, and starts D. Then crawl r2 names C, B and a new site
// (portal.site.test): C starts blocked until the registry's cooldown and
// B exhausted, neither gets a single request (robots.txt included); the
// new site enters pending and is crawled. The registry lists the domains
// with the crawls that know them.
func TestDomainRegistryRuns(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	s := startSite(t, bin, dir, testsite.Options{})
	f := newFarro(t, bin, dir)
	f.startWatchdog()
	f.startManager()
	f.startAgents(1, 4)
	port := ":" + strconv.Itoa(s.model.Port)
	A, B, C, D, N := testsite.HostA+port, testsite.HostE+port, testsite.HostWall+port, testsite.HostB+port, testsite.HostPortal+port
	hostOf := map[string]string{A: testsite.HostA, B: testsite.HostE, C: testsite.HostWall, D: testsite.HostB, N: testsite.HostPortal}
	requests := func(domain string, since time.Time) map[string]int {
		m := map[string]int{}
		for _, r := range s.log(t) {
			if (r.Host == hostOf[domain] || (domain == A && r.Host == testsite.HostWWWA)) && !r.Start.Before(since) {
				m[r.URI]++
			}
		}
		return m
	}
	status := func(name, domain string) crawl.DomainStatus {
		st, err := crawl.Open(&job.Spool{Root: f.spool}, name)
		if err != nil {
			t.Fatal(err)
		}
		d, err := st.LoadDomain(domain)
		if err != nil {
			return ""
		}
		return d.Status
	}

	args := []string{"crawl", "start", "r1", "--seed", s.url(testsite.HostA, "/"), "--seed", s.url(testsite.HostE, "/"), "--seed", s.url(testsite.HostWall, "/"),
		"--allow-private", "--user-agent", testsite.UserAgent, "--scope", "host", "--delay", "20ms",
		"--max-pages-per-domain-per-run", "3", "--max-domain-retries", "0"}
	for _, r := range s.resolve {
		args = append(args, "--resolve", r)
	}
	f.ctl(args...)
	f.waitState("r1", crawl.Paused, 60*time.Second)
	f.ctl("crawl", "add-seeds", "r1", s.url(testsite.HostB, "/"))
	for deadline := time.Now().Add(20 * time.Second); status("r1", D) != crawl.DomainPending; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("D not pending in the paused crawl\n%s", f.ctl("domains", "--crawl", "r1"))
		}
	}
	want1 := map[string]crawl.DomainStatus{A: crawl.DomainActive, B: crawl.DomainExhausted, C: crawl.DomainBlocked, D: crawl.DomainPending}
	for dn, w := range want1 {
		if got := status("r1", dn); got != w {
			t.Errorf("run 1: %s is %s, want %s", dn, got, w)
		}
	}
	if len(requests(D, time.Time{})) != 0 {
		t.Errorf("run 1 reached D: %v", requests(D, time.Time{}))
	}
	if t.Failed() {
		t.Fatalf("run 1\n%s", f.ctl("domains", "--crawl", "r1"))
	}
	runOneA := requests(A, time.Time{})

	run2 := time.Now()
	f.ctl("crawl", "resume", "r1")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c := f.state("r1")
		if c.Run == 2 && c.State == crawl.Paused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run 2 did not end on its budget: %s (%s)\n%s", c.State, c.StateReason, f.ctl("domains", "--crawl", "r1"))
		}
	}
	if n := requests(B, run2); len(n) != 0 {
		t.Errorf("run 2 re-crawled the exhausted B: %v", n)
	}
	if n := requests(C, run2); len(n) != 0 {
		t.Errorf("run 2 sent requests to the blocked C: %v", n)
	}
	if n := requests(D, run2); len(pages2(n)) == 0 {
		t.Errorf("run 2 did not start D: %v", n)
	}
	a2 := pages2(requests(A, run2))
	if len(a2) == 0 {
		t.Errorf("run 2 did not continue A")
	}
	for u := range a2 {
		if runOneA[u] > 0 {
			t.Errorf("run 2 fetched A's %s again", u)
		}
	}

	// A second crawl names C, B and a new site.
	r2 := time.Now()
	args = []string{"crawl", "start", "r2", "--seed", s.url(testsite.HostWall, "/"), "--seed", s.url(testsite.HostE, "/"), "--seed", s.url(testsite.HostPortal, "/"),
		"--allow-private", "--user-agent", testsite.UserAgent, "--scope", "host", "--delay", "20ms"}
	for _, r := range s.resolve {
		args = append(args, "--resolve", r)
	}
	f.ctl(args...)
	for deadline := time.Now().Add(60 * time.Second); status("r2", N) != crawl.DomainExhausted; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("crawl r2 did not crawl the new site\n%s", f.ctl("domains", "--crawl", "r2"))
		}
	}
	time.Sleep(300 * time.Millisecond) // and a little more for any stray request
	if n := requests(C, r2); len(n) != 0 {
		t.Errorf("crawl r2 sent requests to C, blocked by r1 with its cooldown not over: %v", n)
	}
	if n := requests(B, r2); len(n) != 0 {
		t.Errorf("crawl r2 re-crawled B, exhausted by r1: %v", n)
	}
	if n := requests(N, r2); len(pages2(n)) == 0 {
		t.Errorf("crawl r2's new seed was not crawled: %v", n)
	}
	table := f.ctl("domains", "--crawl", "r2")
	for dn, w := range map[string]string{C: "blocked", B: "exhausted", N: "exhausted"} {
		if !strings.Contains(rowOf(table, dn), w) {
			t.Errorf("domains --crawl r2: %s is not %s\n%s", dn, w, table)
		}
	}
	if !strings.HasSuffix(rowOf(table, B), "held (registry)") {
		t.Errorf("domains --crawl r2: B's NEXT is not held (registry)\n%s", table)
	}
	if out, _ := f.ctlCode("why", "r2", s.url(testsite.HostE, "/")); !strings.Contains(out, "is held: from the domain registry: exhausted by crawl r1") {
		t.Errorf("why r2 %s: %s", s.url(testsite.HostE, "/"), out)
	}
	if !strings.Contains(table, "from the domain registry") {
		t.Errorf("domains --crawl r2 does not say where C's and B's state came from\n%s", table)
	}

	// The registry: one entry per domain, with the crawls that know it.
	reg := f.ctl("domains", "--registry")
	for dn, w := range map[string][]string{C: {"blocked", "login_required", "r1,r2"}, B: {"exhausted", "r1,r2"}, D: {"r1"}, N: {"exhausted", "r2"}} {
		row := rowOf(reg, dn)
		for _, s := range w {
			if !strings.Contains(row, s) {
				t.Errorf("domains --registry: %s row %q lacks %q\n%s", dn, row, s, reg)
			}
		}
	}
	var e struct { // the registry's entry (crawl.RegistryEntry)
		Status        crawl.DomainStatus `json:"status"`
		CooldownUntil *time.Time         `json:"cooldown_until"`
		StatusCrawl   string             `json:"status_crawl"`
	}
	if err := json.Unmarshal([]byte(f.ctl("domain", "show", C)), &e); err != nil || e.Status != crawl.DomainBlocked || e.CooldownUntil == nil ||
		time.Until(*e.CooldownUntil) < 29*24*time.Hour || e.StatusCrawl != "r1" {
		t.Errorf("domain show %s: %+v %v; want blocked by r1 for the login-wall cooldown (30 days)", C, e, err)
	}
	// domain reset: the registry's entry too, and r2 crawls B after all.
	resetAt := time.Now()
	if out := f.ctl("domain", "reset", "r2", B, "--reason", "site changed"); !strings.Contains(out, "registry exhausted -> pending") {
		t.Errorf("domain reset r2 %s: %s", B, out)
	}
	for deadline := time.Now().Add(30 * time.Second); len(pages2(requests(B, resetAt))) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("crawl r2 did not crawl B after domain reset\n%s", f.ctl("domains", "--crawl", "r2"))
		}
	}
	if n := requests(C, r2); len(n) != 0 {
		t.Errorf("crawl r2 sent requests to C: %v", n)
	}
	if out := f.ctl("domains", "migrate", "--dry-run"); !strings.Contains(out, "would write domains/"+crawl.DomainFile(C)+" (merged): blocked (login_required) from crawl r1") ||
		!strings.Contains(out, "nothing written") {
		t.Errorf("domains migrate --dry-run:\n%s", out)
	}
}

// pages2 leaves out robots.txt requests.
func pages2(m map[string]int) map[string]int {
	out := map[string]int{}
	for u, n := range m {
		if !strings.HasSuffix(strings.SplitN(u, "?", 2)[0], "robots.txt") {
			out[u] = n
		}
	}
	return out
}

// rowOf is the line of a table that starts with domain.
func rowOf(table, domain string) string {
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, domain+" ") {
			return l
		}
	}
	return ""
}
