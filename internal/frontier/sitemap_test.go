package frontier_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// smSite is a loopback site whose robots.txt lists a sitemap index (a
// gzip sitemap and a plain one, naming pages no page links to) and an
// endless sitemap.
type smSite struct {
	srv       *httptest.Server
	host      string // sm.test:port
	mu        sync.Mutex
	log       []string // paths in arrival order
	hidden2LM string   // lastmod of /hidden2 in s2.xml
}

func newSMSite(t *testing.T) *smSite {
	s := &smSite{hidden2LM: "2026-01-02"}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	_, port, _ := net.SplitHostPort(s.srv.Listener.Addr().String())
	s.host = "sm.test:" + port
	return s
}

func (s *smSite) url(p string) string { return "http://" + s.host + p }

func (s *smSite) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.log = append(s.log, r.URL.Path)
	lm := s.hidden2LM
	s.mu.Unlock()
	page := func(links ...string) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>")
		for _, l := range links {
			fmt.Fprintf(w, `<a href="%s">x</a>`, l)
		}
		fmt.Fprint(w, "</body></html>")
	}
	urlset := func(entries ...string) string {
		var b strings.Builder
		b.WriteString(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
		for _, e := range entries {
			loc, lm, _ := strings.Cut(e, "|")
			fmt.Fprintf(&b, "<url><loc>%s</loc><lastmod>%s</lastmod></url>", loc, lm)
		}
		b.WriteString("</urlset>")
		return b.String()
	}
	switch r.URL.Path {
	case "/robots.txt":
		fmt.Fprintf(w, "User-agent: *\nDisallow: /private\nSitemap: %s\nSitemap: %s\n", s.url("/index.xml"), s.url("/huge.xml"))
	case "/index.xml":
		fmt.Fprintf(w, `<sitemapindex><sitemap><loc>%s</loc></sitemap><sitemap><loc>%s</loc></sitemap></sitemapindex>`, s.url("/s1.xml.gz"), s.url("/s2.xml"))
	case "/s1.xml.gz":
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		fmt.Fprint(zw, urlset(s.url("/a")+"|2026-01-01", s.url("/hidden1")+"|2026-01-01", "http://out.test/x|2026-01-01", s.url("/private/p")+"|2026-01-01"))
		zw.Close()
		w.Header().Set("Content-Type", "application/x-gzip")
		w.Write(buf.Bytes())
	case "/s2.xml":
		fmt.Fprint(w, urlset(s.url("/hidden2")+"|"+lm))
	case "/huge.xml":
		fmt.Fprint(w, "<urlset>")
		chunk := []byte(strings.Repeat("<url><loc>/never</loc></url>", 2000))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	case "/":
		page("/a")
	case "/a", "/hidden2", "/hidden1/child":
		page()
	case "/hidden1":
		page("/hidden1/child")
	default:
		w.WriteHeader(404)
	}
}

func (s *smSite) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func smCrawl(s *smSite, name string, sitemaps bool) *crawl.Crawl {
	c := crawl.New(name)
	c.Seeds = []crawl.Seed{{URL: s.url("/")}}
	c.Delay = crawl.Duration(20 * time.Millisecond)
	c.UserAgent = "farro-test/1.0"
	c.AllowPrivate = true
	c.Resolve = map[string]string{s.host: "127.0.0.1"}
	c.Timeout = crawl.Duration(5 * time.Second)
	c.Sitemaps = sitemaps
	return c
}

// TestSitemaps: pages only a sitemap names (through an index, one of them
// gzip-compressed) are fetched once each, as are the pages they link to;
// an endless sitemap is refused without holding the crawl up; sitemap URLs
// out of scope or disallowed are not fetched; --sitemaps=false reads none.
// Then a refresh round reads the sitemaps again first and fetches the
// page whose lastmod moved past its last fetch before the others.
func TestSitemaps(t *testing.T) {
	site := newSMSite(t)
	e := startEnv(t, 2)
	c := smCrawl(site, "sm", true)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, "sm")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 20*time.Second)
	counts := map[string]int{}
	for _, p := range site.requests() {
		counts[p]++
	}
	for _, p := range []string{"/", "/a", "/hidden1", "/hidden2", "/hidden1/child", "/robots.txt", "/index.xml", "/s1.xml.gz", "/s2.xml", "/huge.xml"} {
		if counts[p] != 1 {
			t.Errorf("%s requested %d times, want once", p, counts[p])
		}
	}
	if len(counts) != 10 {
		t.Errorf("requests %v: want exactly the pages above", counts)
	}
	lastmods := map[string]string{}
	if err := st.ScanSitemapLines(func(l *crawl.SitemapLine) { lastmods[l.URL] = l.LastMod.Format("2006-01-02") }); err != nil {
		t.Fatal(err)
	}
	if lastmods[site.url("/hidden1")] != "2026-01-01" || lastmods[site.url("/hidden2")] != "2026-01-02" || lastmods["http://out.test/x"] != "" {
		t.Errorf("sitemaps.jsonl: %v", lastmods)
	}

	// Refresh: /hidden2 changed after its fetch, /hidden1 did not.
	site.mu.Lock()
	site.hidden2LM = time.Now().UTC().Format(time.RFC3339Nano)
	site.log = nil
	site.mu.Unlock()
	before := time.Now().UTC()
	dom := site.host
	if _, err := st.PutRequest(crawl.Request{Op: crawl.OpRefresh, Domain: dom, Actor: "test", Before: &before}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(func(c *crawl.Crawl) error { c.State, c.Run = crawl.Running, c.Run+1; return nil }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := st.LoadDomain(dom)
		if err == nil && d.Round == 1 && d.Status == crawl.DomainExhausted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refresh round not over: %+v %v", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var pages []string
	robotsAt, firstPage := -1, -1
	for i, p := range site.requests() {
		switch {
		case p == "/robots.txt":
			robotsAt = i
		case !strings.Contains(p, ".xml") && !strings.Contains(p, "robots"):
			if firstPage < 0 {
				firstPage = i
			}
			pages = append(pages, p)
		}
	}
	if robotsAt < 0 || robotsAt > firstPage {
		t.Errorf("refresh round: robots.txt (sitemaps) not read before the pages: %v", site.requests())
	}
	if len(pages) != 5 || pages[0] != "/" || pages[1] != "/hidden2" {
		t.Errorf("refresh round fetched %v: want /, then /hidden2 (changed) before the other depth-1 pages", pages)
	}
}

func TestSitemapsOff(t *testing.T) {
	site := newSMSite(t)
	e := startEnv(t, 2)
	c := smCrawl(site, "nosm", false)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, "nosm")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 20*time.Second)
	if got := fmt.Sprint(site.requests()); got != "[/robots.txt / /a]" {
		t.Errorf("requests %s, want robots.txt and the linked pages only", got)
	}
}
