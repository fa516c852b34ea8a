package frontier_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/pkg/job"
)

// flakySite is a small site on 127.0.0.1 that can be taken down (its
// listener closed: connections refused) and brought back on its port.
type flakySite struct {
	t       *testing.T
	port    int
	pages   int
	mu      sync.Mutex
	ln      net.Listener
	srv     *http.Server
	log     []served            // requests answered
	first   map[string][]string // path -> scripted answers ("503:1" = 503, Retry-After 1), consumed in order
	hang    chan struct{}       // /hang blocks until closed (nil: answers)
	hanging int
}

type served struct {
	path   string
	status int
	at     time.Time
	inm    string // If-None-Match
}

const outageHost = "outage.test"

func startFlaky(t *testing.T, pages int) *flakySite {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &flakySite{t: t, port: ln.Addr().(*net.TCPAddr).Port, pages: pages, first: map[string][]string{}}
	s.serve(ln)
	t.Cleanup(s.down)
	return s
}

func (s *flakySite) serve(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ln = ln
	s.srv = &http.Server{Handler: http.HandlerFunc(s.handle)}
	go func() { _ = s.srv.Serve(ln) }()
}

// down closes the listener and every connection: requests are refused.
func (s *flakySite) down() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// up listens on the same port again.
func (s *flakySite) up() {
	s.t.Helper()
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(s.port)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("listen again on %d: %v", s.port, err)
		}
	}
	s.serve(ln)
}

// hangArrived tells whether a request for /hang is being held.
func (s *flakySite) hangArrived() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hanging > 0
}

func (s *flakySite) handle(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/hang" {
		s.mu.Lock()
		h := s.hang
		if h != nil {
			s.hanging++
		}
		s.mu.Unlock()
		if h != nil {
			select {
			case <-h:
			case <-r.Context().Done():
				return
			}
		}
	}
	s.mu.Lock()
	status, ra := 200, ""
	if q := s.first[r.URL.Path]; len(q) > 0 {
		code, after, _ := strings.Cut(q[0], ":")
		status, _ = strconv.Atoi(code)
		ra = after
		s.first[r.URL.Path] = q[1:]
	}
	if r.URL.Path == "/robots.txt" {
		status = 404
	}
	s.log = append(s.log, served{r.URL.Path, status, time.Now(), r.Header.Get("If-None-Match")})
	s.mu.Unlock()
	if ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	w.Header().Set("Content-Type", "text/html")
	w.Header().Set("ETag", `"v1"`)
	w.WriteHeader(status)
	if r.URL.Path == "/" && status == 200 {
		var b strings.Builder
		for i := 1; i <= s.pages; i++ {
			fmt.Fprintf(&b, `<a href="/p%d">p%d</a>`, i, i)
		}
		fmt.Fprintf(&b, `<a href="/hang">h</a><a href="/flaky">f</a>`)
		_, _ = w.Write([]byte(b.String()))
	}
}

// served200 counts the 200 answers per path.
func (s *flakySite) served200() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := map[string]int{}
	for _, r := range s.log {
		if r.status == 200 {
			n[r.path]++
		}
	}
	return n
}

func (s *flakySite) requests(path string) []served {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []served
	for _, r := range s.log {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

func (s *flakySite) url(path string) string {
	return "http://" + outageHost + ":" + strconv.Itoa(s.port) + path
}

func outageCrawl(s *flakySite, name string) *crawl.Crawl {
	c := crawl.New(name)
	c.Seeds = []crawl.Seed{{URL: s.url("/")}}
	c.MaxDepth = 1
	c.Delay = crawl.Duration(30 * time.Millisecond)
	c.AllowPrivate = true
	c.Resolve = map[string]string{outageHost + ":" + strconv.Itoa(s.port): "127.0.0.1"}
	c.Timeout, c.ConnectTimeout = crawl.Duration(time.Second), crawl.Duration(500*time.Millisecond)
	c.MaxAttempts = 3
	c.UnreachableThreshold = 3
	c.UnreachableAfter = 0 // judged on the count alone (TestCrawlBlipNotJudged: with a duration)
	c.UnreachableCooldown = crawl.Duration(700 * time.Millisecond)
	c.BlockCooldown = crawl.Duration(700 * time.Millisecond)
	c.MaxDomainRetries = 20
	c.RetryBackoff, c.RetryBackoffMax = crawl.Duration(100*time.Millisecond), crawl.Duration(400*time.Millisecond)
	return c
}

func killedOrFailed(t *testing.T, st *crawl.Store) []string {
	t.Helper()
	var bad []string
	if err := st.FailedURLs(crawl.RetryStates, "", func(o *crawl.Outcome) { bad = append(bad, o.URL+" "+o.Outcome+": "+o.Detail) }); err != nil {
		t.Fatal(err)
	}
	return bad
}

// TestCrawlOutage takes the site down mid-crawl for longer than all of a
// URL's attempts and the domain's first cooldown, then brings it back:
// the URLs caught in the outage are not killed, the domain goes
// unreachable and resumes, and every page is fetched once it is back. A
// 503 with Retry-After is retried no sooner than it asks.
func TestCrawlOutage(t *testing.T) {
	const pages = 8
	s := startFlaky(t, pages)
	s.first["/flaky"] = []string{"503:1"}
	e := startEnv(t, 2)
	defer e.stop()
	st, _ := crawl.Open(e.spool, "outage")
	if err := st.Create(outageCrawl(s, "outage")); err != nil {
		t.Fatal(err)
	}
	// Down once the first pages are in.
	for deadline := time.Now().Add(10 * time.Second); len(s.served200()) < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pages never fetched: %v", s.served200())
		}
	}
	s.down()
	downAt := time.Now()
	// Down until the domain has been judged unreachable and has come
	// back from at least one cooldown (more failures than any URL's
	// attempts), and at least 2.5 s.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := st.LoadDomain(outageHost + ":" + strconv.Itoa(s.port))
		if err == nil && d.Cooldowns >= 2 && time.Since(downAt) > 2500*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("domain never unreachable twice during the outage: %+v %v", d, err)
		}
	}
	if bad := killedOrFailed(t, st); len(bad) > 0 {
		t.Errorf("URLs ended during the outage: %v", bad)
	}
	// why follows the retries: a URL whose try failed waits, with the
	// job of that try named.
	retried := 0
	var out bytes.Buffer
	c := &ctl.Ctl{Root: e.spool.Root, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out}
	for _, p := range pageList(pages) {
		if s.served200()[p] > 0 {
			continue
		}
		out.Reset()
		if err := c.Why("outage", s.url(p), true); err != nil {
			t.Fatal(err)
		}
		var a ctl.WhyAnswer
		if err := json.Unmarshal(out.Bytes(), &a); err != nil {
			t.Fatalf("why %s: %v: %s", p, err, out.String())
		}
		if a.Verdict == ctl.WhyKilled || a.Verdict == ctl.WhyDone || a.Verdict == ctl.WhyUnaccounted {
			t.Errorf("why %s during the outage: %s (%s)", p, a.Verdict, a.Message)
		}
		if strings.Contains(a.Message, "queued again after job") {
			retried++
		}
	}
	if retried == 0 {
		t.Error("no URL retried during the outage")
	}
	s.up()
	waitState(t, st, crawl.Done, 15*time.Second)
	got := s.served200()
	for _, p := range append([]string{"/", "/flaky", "/hang"}, pageList(pages)...) {
		if got[p] != 1 {
			t.Errorf("%s answered 200 %d times, want 1 (%v)", p, got[p], got)
		}
	}
	if bad := killedOrFailed(t, st); len(bad) > 0 {
		t.Errorf("URLs failed or killed: %v", bad)
	}
	fl := s.requests("/flaky")
	if len(fl) < 2 || fl[0].status != 503 {
		t.Fatalf("/flaky requests: %+v", fl)
	}
	if gap := fl[1].at.Sub(fl[0].at); gap < 950*time.Millisecond {
		t.Errorf("/flaky retried %s after its 503 with Retry-After: 1", gap)
	}
	d, err := st.LoadDomain(outageHost + ":" + strconv.Itoa(s.port))
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != crawl.DomainExhausted || d.Pending() != 0 || d.PagesFailed != 0 {
		t.Errorf("domain after the outage: %s, %d pending, %d failed", d.Status, d.Pending(), d.PagesFailed)
	}
}

// TestCrawlBlipNotJudged: with unreachable_after in force an outage that
// fails more attempts in a row than unreachable_threshold, but ends before
// that long, never makes the domain unreachable (no cooldown taken: the
// per-reason cooldown is days); the URLs wait on the domain's backoff and
// are all fetched once the site is back.
func TestCrawlBlipNotJudged(t *testing.T) {
	const pages = 6
	s := startFlaky(t, pages)
	e := startEnv(t, 2)
	defer e.stop()
	st, _ := crawl.Open(e.spool, "blip")
	c := outageCrawl(s, "blip")
	c.UnreachableAfter = crawl.Duration(time.Hour)
	c.UnreachableCooldown = crawl.Duration(7 * 24 * time.Hour)
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(s.served200()) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pages never fetched: %v", s.served200())
		}
	}
	s.down()
	host := outageHost + ":" + strconv.Itoa(s.port)
	// Down until the streak is well past the threshold.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d, err := st.LoadDomain(host)
		if err == nil && d.ConsecutiveNetErrorCount > c.UnreachableThreshold+1 {
			if d.Status == crawl.DomainUnreachable || d.Cooldowns != 0 {
				t.Fatalf("a %d-failure blip judged the domain: %s, %d cooldowns", d.ConsecutiveNetErrorCount, d.Status, d.Cooldowns)
			}
			if d.NetErrorsSince == nil {
				t.Fatalf("a streak of %d failures without its start", d.ConsecutiveNetErrorCount)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never more than %d failures in a row during the outage: %+v %v", c.UnreachableThreshold+1, d, err)
		}
	}
	s.up()
	waitState(t, st, crawl.Done, 15*time.Second)
	got := s.served200()
	for _, p := range append([]string{"/"}, pageList(pages)...) {
		if got[p] != 1 {
			t.Errorf("%s answered 200 %d times, want 1 (%v)", p, got[p], got)
		}
	}
	d, err := st.LoadDomain(host)
	if err != nil {
		t.Fatal(err)
	}
	if d.Cooldowns != 0 || d.ConsecutiveNetErrorCount != 0 || d.NetErrorsSince != nil {
		t.Errorf("domain after the blip: %d cooldowns, streak %d since %v", d.Cooldowns, d.ConsecutiveNetErrorCount, d.NetErrorsSince)
	}
}

func pageList(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, "/p"+strconv.Itoa(i))
	}
	return out
}

// TestCrawlRetryKilled: a URL killed by an operator stays killed (not
// retried by the outage policy); farroctl crawl retry puts it back in the
// frontier of the done crawl, which runs again and fetches it.
func TestCrawlRetryKilled(t *testing.T) {
	s := startFlaky(t, 2)
	s.hang = make(chan struct{})
	e := startEnv(t, 2)
	defer e.stop()
	st, _ := crawl.Open(e.spool, "rk")
	if err := st.Create(outageCrawl(s, "rk")); err != nil {
		t.Fatal(err)
	}
	id := crawl.FetchJobID("rk", s.url("/hang"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// Running, its request held by the site: a kill stops it.
		if locs, err := e.spool.Locate(id); err == nil && locs[0].State == job.InProgress && len(s.requests("/hang")) == 0 && s.hangArrived() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the /hang job never ran")
		}
	}
	var out bytes.Buffer
	c := &ctl.Ctl{Root: e.spool.Root, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out}
	if err := c.Act(ctl.Kill, []string{id}, ctl.ActOptions{}); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 15*time.Second)
	bad := killedOrFailed(t, st)
	if len(bad) != 1 || !strings.HasPrefix(bad[0], s.url("/hang")+" killed") {
		t.Fatalf("killed URLs: %v", bad)
	}
	s.mu.Lock()
	close(s.hang)
	s.hang = nil
	s.mu.Unlock()
	out.Reset()
	if err := c.CrawlRetry(ctl.CrawlRetryOptions{Name: "rk", States: []string{"killed"}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "1 URL(s)") || !strings.Contains(out.String(), "done -> running (run 2)") {
		t.Errorf("crawl retry said %q", out.String())
	}
	// Done again, with /hang fetched by a job of its own.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cr, err := st.Load()
		if err == nil && cr.State == crawl.Done && cr.Run == 2 && s.served200()["/hang"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crawl not done again with /hang fetched: %+v %v, served %v", cr, err, s.served200())
		}
	}
	if bad := killedOrFailed(t, st); len(bad) != 0 {
		t.Errorf("still failed after crawl retry: %v", bad)
	}
	if locs, err := e.spool.Locate(crawl.RetryJobID("rk", s.url("/hang"), 0, 1)); err != nil || locs[0].State != job.Succeeded {
		t.Errorf("retry job: %+v %v", locs, err)
	}
}

// TestCrawlOutageGivenUpReset: a domain given up during an outage keeps
// its URLs pending (the crawl finishes, nothing failed); once the site is
// back, domain reset and resume fetch every page.
func TestCrawlOutageGivenUpReset(t *testing.T) {
	const pages = 4
	s := startFlaky(t, pages)
	e := startEnv(t, 2)
	defer e.stop()
	st, _ := crawl.Open(e.spool, "gone")
	cfg := outageCrawl(s, "gone")
	cfg.MaxDomainRetries = 0 // the first unreachable verdict gives up
	if err := st.Create(cfg); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(s.served200()) < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pages never fetched: %v", s.served200())
		}
	}
	s.down()
	waitState(t, st, crawl.Done, 15*time.Second)
	dn := outageHost + ":" + strconv.Itoa(s.port)
	d, err := st.LoadDomain(dn)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != crawl.DomainUnreachable || d.NextCrawlAfter != nil || d.Pending() == 0 {
		t.Fatalf("domain after the outage: %s, next %v, %d pending; want unreachable, given up, URLs pending", d.Status, d.NextCrawlAfter, d.Pending())
	}
	if bad := killedOrFailed(t, st); len(bad) > 0 {
		t.Errorf("URLs ended by the outage: %v", bad)
	}
	s.up()
	var out bytes.Buffer
	c := &ctl.Ctl{Root: e.spool.Root, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out}
	// Without its recrawl: the pages fetched before the outage are not
	// fetched again, which the check below relies on.
	if err := c.DomainResetWith(ctl.DomainResetOptions{Crawl: "gone", Domain: dn, NoRecrawl: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.CrawlResume("gone"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cr, err := st.Load()
		got := s.served200()
		all := true
		for _, p := range pageList(pages) {
			all = all && got[p] == 1
		}
		if err == nil && cr.State == crawl.Done && cr.Run == 2 && all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after reset and resume: %v %v, served %v", cr.State, err, got)
		}
	}
	if bad := killedOrFailed(t, st); len(bad) > 0 {
		t.Errorf("URLs failed: %v", bad)
	}
}

// TestCrawlRefreshRetryConditional: a refresh round's fetch that gets a
// 5xx is retried with the validators of the page's last response.
func TestCrawlRefreshRetryConditional(t *testing.T) {
	s := startFlaky(t, 1)
	e := startEnv(t, 1)
	defer e.stop()
	st, _ := crawl.Open(e.spool, "rf")
	cfg := outageCrawl(s, "rf")
	cfg.MaxDepth = 0
	if err := st.Create(cfg); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 10*time.Second)
	s.mu.Lock()
	s.first["/"] = []string{"503"}
	s.mu.Unlock()
	if _, err := pipeline.RequestRefresh(st, nil, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cr, err := st.Load()
		if err == nil && cr.State == crawl.Done && cr.Run == 2 && len(s.requests("/")) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refresh not done: %+v %v, requests %+v", cr, err, s.requests("/"))
		}
	}
	rs := s.requests("/")
	if len(rs) != 3 || rs[1].status != 503 || rs[1].inm != `"v1"` || rs[2].status != 200 || rs[2].inm != `"v1"` {
		t.Errorf("requests of /: %+v; want 200, then 503 and its retry, both with If-None-Match \"v1\"", rs)
	}
}
