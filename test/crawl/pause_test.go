package crawl_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/job"
)

// TestCrawlPauseResumeCancel: pause stops new requests within one
// interval, resume continues, cancel ends the crawl with nothing left
// queued and no request after it (beyond one interval).
func TestCrawlPauseResumeCancel(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	opts := testsite.Options{Plain: true, Fanout: 4, Levels: 4, ExtraHosts: 2, ExtraPages: 60}
	s := startSite(t, bin, dir, opts, "--plain", "--fanout", "4", "--levels", "4", "--extra-hosts", "2", "--extra-pages", "60")
	f := newFarro(t, bin, dir)
	f.startWatchdog()
	f.startManager()
	f.startAgents(2, 2)
	const interval = 200 * time.Millisecond
	f.ctl(crawlArgs(s, "pr", "--scope", "domain", "--max-depth", "4", "--delay", interval.String(),
		"--seed", s.url("t1.site.test", "/"), "--seed", s.url("t2.site.test", "/"))...)

	waitRequests := func(n int, timeout time.Duration) {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for len(pages(s.log(t))) < n {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d page requests after %s", n, timeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitRequests(12, 30*time.Second)

	// Pause: jobs already released may still start, within an interval.
	if out := f.ctl("crawl", "pause", "pr"); !strings.Contains(out, "paused") {
		t.Fatalf("pause: %s", out)
	}
	paused := time.Now()
	time.Sleep(5 * interval)
	before := len(s.log(t))
	for _, r := range s.log(t) {
		if r.Start.After(paused.Add(interval + serverTolerance)) {
			t.Errorf("%s%s requested %s after the pause (interval %s)", r.Host, r.URI, r.Start.Sub(paused), interval)
		}
	}
	sum := f.status("pr")
	if sum.State != crawl.Paused || sum.InFlight != 0 || sum.Pending == 0 {
		t.Errorf("paused crawl: state %s, %d in flight, %d pending; want paused, 0, some", sum.State, sum.InFlight, sum.Pending)
	}
	if out := f.ctl("crawl", "pause", "pr"); !strings.Contains(out, "already paused") {
		t.Errorf("second pause: %s", out)
	}
	// why, for a URL waiting in a queue: the crawl is paused.
	if u := pendingURL(t, f, "pr"); u != "" {
		var a ctl.WhyAnswer
		if err := json.Unmarshal([]byte(f.ctl("why", "pr", u, "--json")), &a); err != nil || a.Verdict != ctl.WhyNotRunning {
			t.Errorf("why %s while paused: %+v, %v", u, a, err)
		}
	} else {
		t.Error("no queued URL found while paused")
	}

	// A reset while the frontier drives the crawl is a request it applies.
	dom := testsite.HostA + ":" + strconv.Itoa(s.model.Port)
	if out := f.ctl("domain", "reset", "pr", dom); !strings.Contains(out, "reset requested") {
		t.Errorf("domain reset of a driven crawl: %s", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var d crawl.Domain
		if err := json.Unmarshal([]byte(f.ctl("domain", "show", "pr", dom)), &d); err != nil {
			t.Fatal(err)
		}
		if d.Reason == crawl.ReasonReset && d.Status == crawl.DomainPending {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("reset not applied by the frontier: %s %s", d.Status, d.Reason)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Resume: requests continue.
	if out := f.ctl("crawl", "resume", "pr"); !strings.Contains(out, "run 2") {
		t.Fatalf("resume: %s", out)
	}
	resumed := time.Now()
	deadline = time.Now().Add(10 * time.Second)
	for len(s.log(t)) < before+6 {
		if time.Now().After(deadline) {
			t.Fatal("no requests after resume")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("first request %s after resume", firstAfter(s.log(t), resumed).Round(time.Millisecond))

	// Cancel: nothing queued, nothing requested after one interval.
	out := f.ctl("crawl", "cancel", "pr")
	cancelled := time.Now()
	if !strings.Contains(out, "cancelled") {
		t.Fatalf("cancel: %s", out)
	}
	f.waitState("pr", crawl.Cancelled, 30*time.Second)
	time.Sleep(3 * interval)
	for _, r := range s.log(t) {
		if r.Start.After(cancelled.Add(interval + serverTolerance)) {
			t.Errorf("%s%s requested %s after the cancel", r.Host, r.URI, r.Start.Sub(cancelled))
		}
	}
	jobs := f.crawlJobs("pr")
	for _, st := range []job.State{job.Queued, job.Deferred, job.Held, job.InProgress, job.Stale, job.Failed} {
		if jobs[st] != 0 {
			t.Errorf("%d jobs of the cancelled crawl %s", jobs[st], st)
		}
	}
	sum = f.status("pr")
	if sum.State != crawl.Cancelled || sum.InFlight != 0 || sum.Pending == 0 || sum.FinishedAt == nil {
		t.Errorf("cancelled crawl: state %s, %d in flight, %d pending, finished %v", sum.State, sum.InFlight, sum.Pending, sum.FinishedAt)
	}
	if out, code := f.ctlCode("crawl", "resume", "pr"); code == 0 {
		t.Errorf("resume of a cancelled crawl succeeded: %s", out)
	}
	t.Logf("jobs of the cancelled crawl: %v", jobs)
}

func firstAfter(log []testsite.Request, t0 time.Time) time.Duration {
	for _, r := range log {
		if r.Start.After(t0) {
			return r.Start.Sub(t0)
		}
	}
	return -1
}

// TestCrawlCancelQueuedAndRunning: cancel kills the crawl's queued job
// (never requested) and stops its running one (the agent is asked through
// control.json), leaving nothing queued.
func TestCrawlCancelQueuedAndRunning(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	s := startSite(t, bin, dir, testsite.Options{TooSlowDelay: 20 * time.Second}, "--too-slow", "20s")
	f := newFarro(t, bin, dir)
	f.startWatchdog()
	f.startManager()
	seeds := filepath.Join(dir, "seeds.txt")
	// The slow seed has priority: the one agent runs it first.
	if err := os.WriteFile(seeds, []byte(s.url(testsite.HostSlow, "/")+" 5\n"+s.url(testsite.HostC, "/")+"  # waits\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"crawl", "start", "cq", "--seeds-file", seeds, "--obey-robots=false", "--allow-private", "--timeout", "30s", "--user-agent", testsite.UserAgent}
	for _, r := range s.resolve {
		args = append(args, "--resolve", r)
	}
	f.ctl(args...)
	deadline := time.Now().Add(20 * time.Second)
	for f.crawlJobs("cq")[job.Queued] < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the frontier released %v, want 2 queued jobs", f.crawlJobs("cq"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.startAgents(1, 1)
	deadline = time.Now().Add(20 * time.Second)
	for len(s.log(t)) == 0 && !strings.Contains(fmt.Sprint(f.crawlJobs("cq")), "in-progress") {
		if time.Now().After(deadline) {
			t.Fatal("the slow job never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the request is under way
	out := f.ctl("crawl", "cancel", "cq")
	if !strings.Contains(out, "1 jobs killed, 1 running jobs asked to stop") {
		t.Errorf("cancel: %s", out)
	}
	f.waitState("cq", crawl.Cancelled, 20*time.Second)
	jobs := f.crawlJobs("cq")
	if jobs[job.Killed] != 2 || len(jobs) != 1 {
		t.Errorf("jobs after cancel: %v, want 2 killed", jobs)
	}
	for _, r := range s.log(t) {
		if r.Host != testsite.HostSlow {
			t.Errorf("%s%s requested: it was queued when the crawl was cancelled", r.Host, r.URI)
		}
	}
	var a ctl.WhyAnswer
	if err := json.Unmarshal([]byte(f.ctl("why", "cq", s.url(testsite.HostC, "/"), "--json")), &a); err != nil || a.Verdict != ctl.WhyKilled || !strings.Contains(a.Message, "cancelled") {
		t.Errorf("why of the cancelled URL: %+v %v", a, err)
	}
}

// pendingURL returns a URL waiting in one of the crawl's queues.
func pendingURL(t *testing.T, f *farro, name string) string {
	t.Helper()
	st, err := crawl.Open(&job.Spool{Root: f.spool}, name)
	if err != nil {
		t.Fatal(err)
	}
	doms, err := st.Domains()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range doms {
		for _, seg := range d.Queue {
			if seg.Pending() == 0 {
				continue
			}
			es, _, err := crawl.ReadEntries(filepath.Join(st.QueueDir(d.Domain), seg.File), seg.Offset, 1)
			if err == nil && len(es) == 1 {
				return es[0].URL
			}
		}
	}
	return ""
}
