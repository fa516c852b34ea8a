package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/job"
)

func TestExtractLinks(t *testing.T) {
	page := "http://h.test/dir/page.html"
	for _, c := range []struct {
		name, html string
		want       []string
	}{
		{"kinds", `<a href="/a">x</a><area href="b"><link rel="canonical" href="/c"><link rel="stylesheet" href="/css">
			<link rel="Next prefetch" href="/n"><iframe src="/if"></iframe><frame src="/fr"><img src="/img.png"><script src="/s.js"></script>`,
			[]string{"http://h.test/a", "http://h.test/dir/b", "http://h.test/c", "http://h.test/n", "http://h.test/if", "http://h.test/fr"}},
		{"base", `<head><base href="/other/"><base href="/ignored/"></head><a href="x">x</a><a href="../y">y</a>`,
			[]string{"http://h.test/other/x", "http://h.test/y"}},
		{"base after links applies to them too", `<a href="x">x</a><base href="http://o.test/b/">`, []string{"http://o.test/b/x"}},
		{"schemes and duplicates", `<a href="mailto:a@b">m</a><a href="javascript:void(0)">j</a><a href="ftp://h/x">f</a>
			<a href="#frag">self</a><a href="/a#1">a</a><a href="/a#2">a</a><a href="HTTP://H.TEST/%61">a</a><a>none</a><a href="">empty</a>`,
			[]string{"http://h.test/dir/page.html", "http://h.test/a"}},
		{"entities and whitespace", `<a href=" /q?a=1&amp;b=2 ">q</a><A HREF='/UPPER'>u</A>`, []string{"http://h.test/q?a=1&b=2", "http://h.test/UPPER"}},
	} {
		got := ExtractLinks(page, []byte(c.html))
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	if !IsHTML("text/html; charset=utf-8", nil) || IsHTML("application/json", []byte("<html>")) || !IsHTML("", []byte("  <!DOCTYPE html><html>")) {
		t.Error("IsHTML")
	}
}

func TestRetryAfterAndPrivate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if d, ok := ParseRetryAfter("120", now); !ok || d != 2*time.Minute {
		t.Errorf("seconds: %v %v", d, ok)
	}
	if d, ok := ParseRetryAfter(now.Add(30*time.Second).Format(http.TimeFormat), now); !ok || d != 30*time.Second {
		t.Errorf("date: %v %v", d, ok)
	}
	if _, ok := ParseRetryAfter("soon", now); ok {
		t.Error("garbage accepted")
	}
	for a, want := range map[string]bool{
		"127.0.0.1": true, "10.1.2.3": true, "192.168.0.1": true, "172.16.0.1": true, "169.254.169.254": true,
		"100.64.0.1": true, "0.0.0.0": true, "::1": true, "fe80::1": true, "fd00::1": true, "::ffff:127.0.0.1": true,
		"224.0.0.1": true, "93.184.216.34": false, "2606:2800:220:1::1": false, "8.8.8.8": false,
	} {
		if got := IsPrivate(netip.MustParseAddr(a)); got != want {
			t.Errorf("IsPrivate(%s) = %v, want %v", a, got, want)
		}
	}
}

// harness runs a handler against a httptest server for one prompt.
type harness struct {
	t     *testing.T
	spool *job.Spool
	h     *Handler
	srv   *httptest.Server
	port  string
}

func newHarness(t *testing.T, mux http.Handler) *harness {
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(s, "t")
	c := crawl.New("t")
	c.Seeds = []crawl.Seed{{URL: "http://site.test/"}}
	_ = c.Validate()
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return &harness{t: t, spool: s, h: NewHandler(s, nil), srv: srv, port: port}
}

func (hs *harness) prompt(path string, mutate func(p *crawl.FetchPrompt)) crawl.FetchPrompt {
	p := crawl.FetchPrompt{Crawl: "t", URL: "http://site.test:" + hs.port + path, Domain: "site.test:" + hs.port, UserAgent: "farro-test/1.0",
		TimeoutMS: 2000, ConnectTimeoutMS: 1000, MaxBodyBytes: 1 << 20, AllowPrivate: true,
		Resolve: map[string]string{"site.test:" + hs.port: "127.0.0.1"}}
	if mutate != nil {
		mutate(&p)
	}
	return p
}

func (hs *harness) run(h agent.Handler, prompt any) (*crawl.Artifact, error) {
	hs.t.Helper()
	b, _ := json.Marshal(prompt)
	dir := hs.t.TempDir()
	res := h.Run(context.Background(), agent.Task{Env: job.Envelope{Prompt: b, Lifecycle: &job.Job{ID: "c-t-000000000000000000000000", Attempts: 1}, Runtime: job.Runtime{Dir: dir}}})
	var a crawl.Artifact
	if err := crawl.ReadResult(dir, &a); err != nil {
		hs.t.Fatalf("no artifact: %v (handler: %v)", err, res.Err)
	}
	return &a, res.Err
}

func TestFetch(t *testing.T) {
	var uaSeen sync.Map
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		uaSeen.Store(r.UserAgent(), true)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<a href="/x">x</a><a href="y">y</a>`)
	})
	mux.HandleFunc("/redir", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "../to?q=1#f", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/gone", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(404)
		fmt.Fprint(w, `<a href="/x">x</a>`)
	})
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(429)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(bytes.Repeat([]byte("z"), 5000))
	})
	mux.HandleFunc("/gz", func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			t.Error("no Accept-Encoding: gzip")
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zw.Write([]byte(`<a href="/zipped">z</a>`))
		zw.Close()
	})
	hs := newHarness(t, mux)

	a, err := hs.run(hs.h, hs.prompt("/page", nil))
	if err != nil || a.Outcome != crawl.OutcomeFetched || a.HTTPStatus != 200 || len(a.Links) != 2 || a.Links[1] != "http://site.test:"+hs.port+"/y" {
		t.Errorf("page: %+v, %v", a, err)
	}
	if _, ok := uaSeen.Load("farro-test/1.0"); !ok {
		t.Error("User-Agent not sent")
	}
	st, _ := crawl.Open(hs.spool, "t")
	if b, err := os.ReadFile(st.BodyPath(a.SHA256)); err != nil || !strings.Contains(string(b), "href") {
		t.Errorf("body not stored content-addressed: %v", err)
	}

	a, err = hs.run(hs.h, hs.prompt("/redir", nil))
	if err != nil || a.HTTPStatus != 301 || a.RedirectTo != "http://site.test:"+hs.port+"/to?q=1" || len(a.Links) != 0 {
		t.Errorf("redirect is the artifact, not followed: %+v, %v", a, err)
	}
	a, err = hs.run(hs.h, hs.prompt("/gone", nil))
	if err != nil || a.HTTPStatus != 404 || len(a.Links) != 0 {
		t.Errorf("404 succeeds, links of error pages are not followed: %+v, %v", a, err)
	}
	// (Another domain: the Retry-After closes the domain's gate for 7s.)
	a, err = hs.run(hs.h, hs.prompt("/busy", func(p *crawl.FetchPrompt) { p.Domain = "busy" }))
	if err != nil || a.HTTPStatus != 429 || a.RetryAfter != 7 {
		t.Errorf("429: %+v, %v", a, err)
	}
	a, err = hs.run(hs.h, hs.prompt("/big", func(p *crawl.FetchPrompt) { p.MaxBodyBytes = 1000 }))
	if err != nil || !a.Truncated || a.BodyBytes != 1000 || a.ErrorCode != crawl.ErrCodeTooLarge {
		t.Errorf("size cap: %+v, %v", a, err)
	}
	a, err = hs.run(hs.h, hs.prompt("/gz", nil))
	if err != nil || len(a.Links) != 1 || !strings.HasSuffix(a.Links[0], "/zipped") {
		t.Errorf("gzip: %+v, %v", a, err)
	}

	// The SSRF guard refuses loopback without allow_private, after
	// resolution: not retried.
	a, err = hs.run(hs.h, hs.prompt("/page", func(p *crawl.FetchPrompt) { p.AllowPrivate = false }))
	if err != nil || a.Outcome != crawl.OutcomeRefused || a.ErrorCode != crawl.ErrCodePrivate || a.HTTPStatus != 0 {
		t.Errorf("SSRF guard: %+v, %v", a, err)
	}
	// A network failure is an error (retried), http_status 0.
	a, err = hs.run(hs.h, hs.prompt("/page", func(p *crawl.FetchPrompt) {
		p.Resolve = map[string]string{"site.test:1": "127.0.0.1"}
		p.URL = "http://site.test:1/page"
	}))
	if err == nil || a.Outcome != crawl.OutcomeNetworkError || a.HTTPStatus != 0 || a.ErrorCode != crawl.ErrCodeConnect {
		t.Errorf("connect failure: %+v, %v", a, err)
	}
	// robots.txt the frontier released the URL under is checked again.
	body := []byte("User-agent: *\nDisallow: /page\n")
	sha := fmt.Sprintf("%x", sha256sum(body))
	_ = st.PutBody(sha, body)
	a, err = hs.run(hs.h, hs.prompt("/page", func(p *crawl.FetchPrompt) {
		p.Robots = &crawl.RobotsRef{Origin: "x", Verdict: crawl.RobotsRules, HTTPStatus: 200, BodySHA256: sha}
	}))
	if err != nil || a.Outcome != crawl.OutcomeRefused || a.ErrorCode != crawl.ErrCodeRobots || !strings.Contains(a.Error, "Disallow: /page") {
		t.Errorf("robots: %+v, %v", a, err)
	}
}

func TestRobotsHandler(t *testing.T) {
	mux := http.NewServeMux()
	hops := 0
	var mu sync.Mutex
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		switch {
		case host == "ok.test" && r.URL.Path == "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /x\n")
		case host == "gone.test":
			w.WriteHeader(404)
		case host == "err.test":
			w.WriteHeader(503)
		case host == "slow.test":
			w.WriteHeader(429)
		case host == "hop.test" && r.URL.Path == "/robots.txt":
			http.Redirect(w, r, "/r1", 301)
		case host == "hop.test" && r.URL.Path == "/r1":
			http.Redirect(w, r, "http://ok.test:"+r.Host[strings.IndexByte(r.Host, ':')+1:]+"/robots.txt", 302)
		case host == "loop.test":
			mu.Lock()
			hops++
			mu.Unlock()
			http.Redirect(w, r, "/robots.txt?"+fmt.Sprint(time.Now().UnixNano()), 302)
		}
	})
	hs := newHarness(t, mux)
	rh := &RobotsHandler{Handler: hs.h}
	run := func(host string) *crawl.RobotsArtifact {
		p := crawl.RobotsPrompt{Crawl: "t", Origin: "http://" + host + ":" + hs.port, Domain: host, UserAgent: "farro-test/1.0",
			TimeoutMS: 2000, ConnectTimeoutMS: 1000, AllowPrivate: true, Resolve: map[string]string{}}
		for _, h := range []string{"ok.test", "gone.test", "err.test", "slow.test", "hop.test", "loop.test", "down.test"} {
			addr := "127.0.0.1"
			if h == "down.test" {
				addr = "127.0.0.2"
			}
			p.Resolve[h+":"+hs.port] = addr
		}
		b, _ := json.Marshal(p)
		dir := t.TempDir()
		if res := rh.Run(context.Background(), agent.Task{Env: job.Envelope{Prompt: b, Lifecycle: &job.Job{ID: "r-t-0000000000000000-0"}, Runtime: job.Runtime{Dir: dir}}}); res.Err != nil {
			t.Fatalf("%s: %v", host, res.Err)
		}
		var a crawl.RobotsArtifact
		if err := crawl.ReadResult(dir, &a); err != nil {
			t.Fatal(err)
		}
		return &a
	}
	for host, want := range map[string]string{"ok.test": crawl.RobotsRules, "gone.test": crawl.RobotsAllowAll, "err.test": crawl.RobotsDisallowAll,
		"slow.test": crawl.RobotsDisallowAll, "hop.test": crawl.RobotsRules, "loop.test": crawl.RobotsAllowAll} {
		if a := run(host); a.Verdict != want {
			t.Errorf("%s: verdict %s (%+v), want %s", host, a.Verdict, a, want)
		}
	}
	if hops != MaxRobotsRedirects+1 {
		t.Errorf("redirect loop: %d requests, want %d (the first and five redirects)", hops, MaxRobotsRedirects+1)
	}
	if a := run("hop.test"); a.Redirects != 2 || !strings.Contains(a.FinalURL, "ok.test") || a.BodySHA256 == "" {
		t.Errorf("redirected robots.txt: %+v", a)
	}
	if a := run("down.test"); a.Verdict != crawl.RobotsDisallowAll || a.HTTPStatus != 0 {
		t.Errorf("unreachable robots.txt: %+v", a)
	}
}

// TestGateSpacingUnderDelays is the politeness race: fetchers of one
// domain descheduled between passing the gate and writing their request
// (afterGateHook sleeps up to 2.5 intervals there) must still reach the
// server at least an interval apart. Checked from the server's access log
// (kernel receive timestamps of each request's first bytes).
func TestGateSpacingUnderDelays(t *testing.T) {
	site := testsite.Start(testsite.Options{Plain: true})
	t.Cleanup(site.Close)
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(s, "t")
	c := crawl.New("t")
	c.Seeds = []crawl.Seed{{URL: site.URL(testsite.HostA, "/")}}
	_ = c.Validate()
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	const interval = 30 * time.Millisecond
	const workers, perWorker = 8, 6
	var seq atomic.Int64
	afterGateHook = func() {
		// Every other pass is descheduled for 0..75 ms.
		if n := seq.Add(1); n%2 == 0 {
			time.Sleep(time.Duration(n*7919%76) * time.Millisecond)
		}
	}
	t.Cleanup(func() { afterGateHook = nil })
	h := NewHandler(s, nil)
	hostPort := fmt.Sprintf("%s:%d", testsite.HostA, site.Port)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				p := crawl.FetchPrompt{Crawl: "t", URL: site.URL(testsite.HostA, fmt.Sprintf("/n/%d", w*perWorker+i+1)), Domain: testsite.HostA,
					UserAgent: "farro-test/1.0", TimeoutMS: 5000, ConnectTimeoutMS: 2000, MaxBodyBytes: 1 << 20, AllowPrivate: true,
					Resolve: map[string]string{hostPort: "127.0.0.1"}, MinIntervalMS: interval.Milliseconds()}
				b, _ := json.Marshal(p)
				res := h.Run(context.Background(), agent.Task{Env: job.Envelope{Prompt: b,
					Lifecycle: &job.Job{ID: fmt.Sprintf("c-t-%024d", w*perWorker+i), Attempts: 1}, Runtime: job.Runtime{Dir: t.TempDir()}}})
				if res.Err != nil {
					t.Error(res.Err)
				}
			}
		}()
	}
	wg.Wait()
	log := site.Log()
	if len(log) != workers*perWorker {
		t.Fatalf("%d requests logged, want %d", len(log), workers*perWorker)
	}
	// The arrival stamps are the kernel's: 1 ms covers clock granularity.
	gaps := testsite.CloseGaps(log, func(string) time.Duration { return interval }, time.Millisecond)
	for _, g := range gaps {
		t.Errorf("too close: %s", g)
	}
	if len(gaps) > 0 {
		t.Logf("%d of %d consecutive requests closer than %s", len(gaps), len(log)-1, interval)
	}
}

func sha256sum(b []byte) [32]byte { return sha256.Sum256(b) }
