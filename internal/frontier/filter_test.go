package frontier_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/job"
)

// filterSite serves f.test on loopback: pages with each URL-filter case,
// a PDF (whose body must not be read when only HTML is accepted), and
// each robots-meta form; it records the paths requested.
type filterSite struct {
	srv        *httptest.Server
	host       string // f.test:PORT
	mu         sync.Mutex
	seen       map[string]int
	pdfAborted atomic.Bool // the client closed the PDF's connection before its body
	pdfServed  atomic.Bool
}

func newFilterSite(t *testing.T) *filterSite {
	page := func(w http.ResponseWriter, head, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><html><head>%s</head><body>%s</body></html>", head, body)
	}
	fs := &filterSite{seen: map[string]int{}}
	fs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.mu.Lock()
		fs.seen[r.URL.RequestURI()]++
		fs.mu.Unlock()
		switch r.URL.Path {
		case "/":
			page(w, "", `<a href="/keep/1">k</a><a href="/skip/2">s</a><a href="/query?x=1">q</a><a href="/9no">n</a>
				<a href="/doc.pdf">pdf</a><a href="/nf">nf</a><a href="/ni">ni</a><a href="/xr">xr</a><a href="/xh">xh</a>
				<a href="/none">none</a><a rel="external nofollow" href="/relchild">rel</a>`)
		case "/doc.pdf":
			// Headers now, the body never unless the client waits for it
			// (then the fetch times out): a client that does not read it
			// closes the connection.
			w.Header().Set("Content-Type", "application/pdf")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				fs.pdfAborted.Store(true)
			case <-time.After(5 * time.Second):
				fs.pdfServed.Store(true)
				w.Write(bytes.Repeat([]byte("%PDF"), 1<<10))
			}
		case "/nf":
			page(w, `<meta name="ROBOTS" content="index, NoFollow">`, `<a href="/nf-child">c</a>`)
		case "/ni":
			page(w, `<meta name="farro-test" content="noindex">`, `<a href="/ni-child">c</a>`)
		case "/none":
			page(w, `<meta name="robots" content="none">`, `<a href="/none-child">c</a>`)
		case "/xr":
			w.Header().Set("X-Robots-Tag", "farro-test: nofollow")
			page(w, "", `<a href="/xr-child">c</a>`)
		case "/xh":
			w.Header().Add("X-Robots-Tag", "otherbot: noindex, nofollow")
			w.Header().Add("X-Robots-Tag", "unavailable_after: 25 Jun 2010 15:00:00 PST")
			page(w, `<meta name="otherbot" content="nofollow">`, `<a href="/xh-child">c</a>`)
		default:
			page(w, "", "leaf")
		}
	}))
	t.Cleanup(func() { fs.srv.Close() })
	_, port, _ := net.SplitHostPort(fs.srv.Listener.Addr().String())
	fs.host = "f.test:" + port
	return fs
}

func (fs *filterSite) url(path string) string { return "http://" + fs.host + path }

func (fs *filterSite) requested() map[string]int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	m := map[string]int{}
	for k, v := range fs.seen {
		m[k] = v
	}
	return m
}

func (fs *filterSite) crawl(name string, mutate func(*crawl.Crawl)) *crawl.Crawl {
	c := crawl.New(name)
	c.Seeds = []crawl.Seed{{URL: fs.url("/")}}
	c.MaxDepth = 3
	c.Delay = 0
	c.MaxInFlightPerDomain = 4
	c.UserAgent = testsite.UserAgent
	c.ObeyRobots = false
	c.AllowPrivate = true
	c.Resolve = map[string]string{fs.host: "127.0.0.1"}
	c.Timeout = crawl.Duration(3 * time.Second)
	c.MaxAttempts = 1
	mutate(c)
	return c
}

func whyOf(t *testing.T, root, name, u string) ctl.WhyAnswer {
	t.Helper()
	var out bytes.Buffer
	if err := (&ctl.Ctl{Root: root, Stdout: &out, Stderr: &out}).Why(name, u, true); err != nil {
		t.Fatal(err)
	}
	var a ctl.WhyAnswer
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return a
}

// TestCrawlFilters crawls a loopback site with URL filters, a content-type
// list and pages carrying each robots-meta form, then with the robots
// switches, and checks what was requested and what why says.
func TestCrawlFilters(t *testing.T) {
	t.Run("obeyed", func(t *testing.T) {
		fs := newFilterSite(t)
		e := startEnv(t, 4)
		c := fs.crawl("filt", func(c *crawl.Crawl) {
			c.RejectPrefix = []string{"/skip/"}
			c.RejectRegex = []string{`\?x=\d{1,3}$`}
			c.AcceptRegex = []string{`^http://f\.test:\d+/[a-z]`}
			c.ContentTypes = []string{"text/html"}
		})
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		st, _ := crawl.Open(e.spool, "filt")
		if err := st.Create(c); err != nil {
			t.Fatal(err)
		}
		waitState(t, st, crawl.Done, 20*time.Second)
		got := fs.requested()
		for _, p := range []string{"/", "/keep/1", "/doc.pdf", "/nf", "/ni", "/ni-child", "/xr", "/xh", "/xh-child", "/none"} {
			if got[p] != 1 {
				t.Errorf("%s requested %d times, want once (all: %v)", p, got[p], got)
			}
		}
		for _, p := range []string{"/skip/2", "/query?x=1", "/9no", "/nf-child", "/xr-child", "/none-child", "/relchild"} {
			if got[p] != 0 {
				t.Errorf("%s requested %d times, want never", p, got[p])
			}
		}
		if !fs.pdfAborted.Load() || fs.pdfServed.Load() {
			t.Errorf("the PDF's body was waited for (aborted %v, served %v)", fs.pdfAborted.Load(), fs.pdfServed.Load())
		}
		if f, err := st.LoadFrontier(); err != nil || f.Filtered != 3 {
			t.Errorf("frontier.json filtered = %+v, %v; want 3", f, err)
		}
		for _, w := range []struct{ path, verdict, says string }{
			{"/skip/2", ctl.WhyFiltered, "--reject-prefix /skip/"},
			{"/query?x=1", ctl.WhyFiltered, `--reject-regex \?x=\d{1,3}$`},
			{"/9no", ctl.WhyFiltered, "matches no --accept-regex or --accept-prefix"},
			{"/doc.pdf", ctl.WhyFiltered, `content type "application/pdf" not in the crawl's content types (text/html): body not downloaded`},
			{"/nf", ctl.WhyDone, "nofollow: its links were not followed; robots directives meta: index, nofollow"},
			{"/ni", ctl.WhyDone, "noindex: archived, marked not to be indexed; robots directives meta: noindex"},
			{"/none", ctl.WhyDone, "nofollow: its links were not followed; noindex: archived, marked not to be indexed; robots directives meta: none"},
			{"/xr", ctl.WhyDone, "robots directives header: nofollow"},
			{"/", ctl.WhyDone, "1 rel=nofollow links not followed"},
			{"/", ctl.WhyDone, "done: http_status 200"},
			{"/keep/1", ctl.WhyDone, "done: http_status 200"},
		} {
			a := whyOf(t, e.spool.Root, "filt", fs.url(w.path))
			if a.Verdict != w.verdict || !strings.Contains(a.Message, w.says) {
				t.Errorf("why %s: %s %q; want %s saying %q", w.path, a.Verdict, a.Message, w.verdict, w.says)
			}
		}
		// /xh's directives are for another bot: nothing noted.
		if a := whyOf(t, e.spool.Root, "filt", fs.url("/xh")); strings.Contains(a.Message, "robots directives") {
			t.Errorf("why /xh: %q", a.Message)
		}
		// The outcome log carries the marks (export and why after retention).
		marks := map[string]crawl.PageDirectives{}
		_ = st.ScanOutcomes(func(o *crawl.Outcome) bool {
			marks[strings.TrimPrefix(o.URL, fs.url(""))] = o.PageDirectives
			return true
		})
		// After retention removed the jobs, why and export still tell.
		for _, p := range []string{"/doc.pdf", "/ni"} {
			if err := os.RemoveAll(e.spool.JobDir(job.Succeeded, "", crawl.FetchJobID("filt", fs.url(p)))); err != nil {
				t.Fatal(err)
			}
		}
		for _, w := range []struct{ path, verdict, says string }{
			{"/doc.pdf", ctl.WhyFiltered, `not in the crawl's content types (text/html): body not downloaded (job `},
			{"/ni", ctl.WhyDone, "noindex: archived, marked not to be indexed; robots directives meta: noindex (job "},
		} {
			a := whyOf(t, e.spool.Root, "filt", fs.url(w.path))
			if a.Verdict != w.verdict || !strings.Contains(a.Message, w.says) || !strings.Contains(a.Message, "no longer in the spool") {
				t.Errorf("why %s after retention: %s %q; want %s saying %q", w.path, a.Verdict, a.Message, w.verdict, w.says)
			}
		}
		var out bytes.Buffer
		if err := (&ctl.Ctl{Root: e.spool.Root, Stdout: &out, Stderr: &out}).CrawlExport("filt"); err != nil {
			t.Fatal(err)
		}
		rows := 0
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var a crawl.Artifact
			if err := json.Unmarshal([]byte(line), &a); err != nil {
				t.Fatalf("export line %q: %v", line, err)
			}
			if a.NormalizedURL == fs.url("/ni") || a.NormalizedURL == fs.url("/none") || a.NormalizedURL == fs.url("/nf") {
				rows++
				if a.Noindex != (a.NormalizedURL != fs.url("/nf")) {
					t.Errorf("export row of %s: noindex %v", a.NormalizedURL, a.Noindex)
				}
			}
		}
		if rows != 3 {
			t.Errorf("export: %d rows of /ni, /none, /nf, want 3:\n%s", rows, out.String())
		}
		if !marks["/ni"].Noindex || marks["/ni"].Nofollow || !marks["/none"].Noindex || !marks["/none"].Nofollow || marks["/"].NofollowLinks != 1 || marks["/xh"] != (crawl.PageDirectives{}) {
			t.Errorf("outcome marks: %+v", marks)
		}
	})
	t.Run("ignored", func(t *testing.T) {
		fs := newFilterSite(t)
		e := startEnv(t, 4)
		c := fs.crawl("nofilt", func(c *crawl.Crawl) {
			c.IgnoreNofollow, c.IgnoreRobotsMeta = true, true
			c.RejectPrefix = []string{"/doc.pdf"} // (a 5 s page)
		})
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		st, _ := crawl.Open(e.spool, "nofilt")
		if err := st.Create(c); err != nil {
			t.Fatal(err)
		}
		waitState(t, st, crawl.Done, 20*time.Second)
		got := fs.requested()
		for _, p := range []string{"/skip/2", "/query?x=1", "/9no", "/nf-child", "/xr-child", "/none-child", "/relchild", "/ni-child"} {
			if got[p] != 1 {
				t.Errorf("%s requested %d times, want once (all: %v)", p, got[p], got)
			}
		}
		if a := whyOf(t, e.spool.Root, "nofilt", fs.url("/none")); a.Verdict != ctl.WhyDone || strings.Contains(a.Message, "robots directives") {
			t.Errorf("why /none with --ignore-robots-meta: %s %q", a.Verdict, a.Message)
		}
	})
}
