package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/job"
)

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func urlset(locs ...string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, l := range locs {
		loc, lm, _ := strings.Cut(l, "|")
		b.WriteString("<url><loc>" + loc + "</loc>")
		if lm != "" {
			b.WriteString("<lastmod>" + lm + "</lastmod>")
		}
		b.WriteString("</url>\n")
	}
	b.WriteString("</urlset>\n")
	return b.String()
}

func index(locs ...string) string {
	var b strings.Builder
	b.WriteString(`<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, l := range locs {
		b.WriteString("<sitemap><loc>" + l + "</loc><lastmod>2026-01-01</lastmod></sitemap>")
	}
	b.WriteString("</sitemapindex>")
	return b.String()
}

func TestParseSitemap(t *testing.T) {
	base := "http://h.test/sitemap.xml"
	kind, es, dropped, err := ParseSitemap(base, []byte(urlset("http://h.test/a|2026-03-04T05:06:07+02:00", " /rel ", "ftp://h.test/x", "http://h.test/b|2026-02", "http://h.test/c|garbage")), 1<<20, 10)
	if err != nil || kind != SitemapURLSet || dropped != 0 {
		t.Fatalf("urlset: %s %d %v", kind, dropped, err)
	}
	var got []string
	for _, e := range es {
		s := e.Loc
		if e.LastMod != nil {
			s += "|" + e.LastMod.Format(time.RFC3339)
		}
		got = append(got, s)
	}
	want := []string{"http://h.test/a|2026-03-04T03:06:07Z", "http://h.test/rel", "http://h.test/b|2026-02-01T00:00:00Z", "http://h.test/c"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("entries %v, want %v (ftp dropped, relative resolved, lastmod in UTC, bad lastmod ignored)", got, want)
	}
	// The cap on entries; gzip is read transparently.
	kind, es, dropped, err = ParseSitemap(base, gz(t, []byte(index("/s1.xml", "/s2.xml", "/s3.xml"))), 1<<20, 2)
	if err != nil || kind != SitemapIndex || len(es) != 2 || dropped != 1 || es[1].Loc != "http://h.test/s2.xml" {
		t.Errorf("gzip index capped at 2: %s %v %d %v", kind, es, dropped, err)
	}
	// A gzip bomb: refused at the cap, whatever it would expand to.
	bomb := gz(t, []byte(urlset()+strings.Repeat(" ", 4<<20)))
	if _, _, _, err := ParseSitemap(base, bomb, 1<<20, 10); !errors.Is(err, errSitemapTooLarge) {
		t.Errorf("gzip over the cap: %v", err)
	}
	for name, body := range map[string]string{
		"html":      "<!doctype html><html><body>hi</body></html>",
		"text":      "http://h.test/a\nhttp://h.test/b\n",
		"empty":     "",
		"truncated": `<urlset><url><loc>http://h.test/a</loc></url><url><loc>http://h.te`,
		"rss":       `<rss><channel><item><link>http://h.test/a</link></item></channel></rss>`,
		"bad gzip":  "\x1f\x8bnot gzip at all",
	} {
		if _, es, _, err := ParseSitemap(base, []byte(body), 1<<20, 10); !errors.Is(err, errNotSitemap) || len(es) != 0 {
			t.Errorf("%s: %d entries, err %v; want not a sitemap", name, len(es), err)
		}
	}
}

// TestRobotsSitemaps: the robots job reads the sitemaps robots.txt lists,
// follows an index one level (not a nested one), decompresses a gzip
// sitemap, refuses an endless one at the size cap without blocking, does
// not fetch a sitemap of another domain or one robots.txt disallows, and
// spaces every request by the domain's interval.
func TestRobotsSitemaps(t *testing.T) {
	var mu sync.Mutex
	arrivals := map[string][]time.Time{}
	var port string
	abs := func(host, path string) string { return "http://" + host + ":" + port + path }
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		mu.Lock()
		arrivals[host] = append(arrivals[host], time.Now())
		mu.Unlock()
		switch host + r.URL.Path {
		case "sm.test/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nDisallow: /private\n\nSitemap: %s\nSitemap: %s\nSitemap: %s\nSitemap: %s\n",
				abs("sm.test", "/index.xml"), abs("sm.test", "/huge.xml"), abs("other.test", "/s.xml"), abs("sm.test", "/private/s.xml"))
		case "sm.test/index.xml":
			fmt.Fprint(w, index("/a.xml.gz", "/b.xml", "/nested.xml", "/b.xml"))
		case "sm.test/a.xml.gz":
			w.Header().Set("Content-Type", "application/gzip")
			w.Write(gz(t, []byte(urlset(abs("sm.test", "/only-here")+"|2026-05-01", abs("sm.test", "/p1")))))
		case "sm.test/b.xml":
			fmt.Fprint(w, urlset(abs("sm.test", "/p2")))
		case "sm.test/nested.xml":
			fmt.Fprint(w, index("/deeper.xml"))
		case "sm.test/huge.xml":
			// Endless: the reader must stop at the cap.
			fmt.Fprint(w, `<urlset>`)
			chunk := []byte(strings.Repeat("<url><loc>http://sm.test/x</loc></url>", 1000))
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "plain.test/robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow:\n")
		case "plain.test/sitemap.xml":
			fmt.Fprint(w, urlset(abs("plain.test", "/q")))
		case "cd.test/robots.txt":
			fmt.Fprint(w, "User-agent: *\nCrawl-delay: 0.25\n")
		case "cd.test/sitemap.xml":
			fmt.Fprint(w, urlset(abs("cd.test", "/q")))
		case "junk.test/sitemap.xml":
			fmt.Fprint(w, "<html><body>not a sitemap</body></html>")
		default:
			w.WriteHeader(404)
		}
	})
	hs := newHarness(t, mux)
	port = hs.port
	rh := &RobotsHandler{Handler: hs.h}
	const interval = 60 * time.Millisecond
	run := func(host string, sitemaps bool) *crawl.RobotsArtifact {
		t.Helper()
		p := crawl.RobotsPrompt{Crawl: "t", Origin: "http://" + host + ":" + port, Domain: host + ":" + port, UserAgent: "farro-test/1.0",
			TimeoutMS: 5000, ConnectTimeoutMS: 1000, AllowPrivate: true, MinIntervalMS: interval.Milliseconds(), Sitemaps: sitemaps, MaxCrawlDelayMS: 30000,
			Resolve: map[string]string{host + ":" + port: "127.0.0.1"}}
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

	start := time.Now()
	a := run("sm.test", true)
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("robots job with an endless sitemap took %s", d)
	}
	if a.Verdict != crawl.RobotsRules {
		t.Fatalf("verdict %s", a.Verdict)
	}
	fates := map[string]string{}
	for _, sf := range a.Sitemaps {
		path := sf.URL[strings.LastIndex(sf.URL, ":"+port)+len(port)+1:]
		host := strings.TrimPrefix(sf.URL[:strings.LastIndex(sf.URL, ":"+port)], "http://")
		fates[host+path] = fmt.Sprintf("%d/%s/%d/%s", sf.HTTPStatus, sf.Kind, sf.URLs, sf.ErrorCode)
	}
	want := map[string]string{
		"sm.test/index.xml":     "200/sitemapindex/4/",
		"sm.test/huge.xml":      "200//0/too_large",
		"other.test/s.xml":      "0//0/bad_url",
		"sm.test/private/s.xml": "0//0/robots_denied",
		"sm.test/a.xml.gz":      "200/urlset/2/",
		"sm.test/b.xml":         "200/urlset/1/",
		"sm.test/nested.xml":    "200/sitemapindex/0/too_large",
	}
	if fmt.Sprint(fates) != fmt.Sprint(want) {
		t.Errorf("sitemaps:\n got %v\nwant %v", fates, want)
	}
	var urls []string
	for _, su := range a.SitemapURLs {
		s := strings.Replace(su.URL, ":"+port, "", 1)
		if su.LastMod != nil {
			s += "|" + su.LastMod.Format("2006-01-02")
		}
		urls = append(urls, s)
	}
	sort.Strings(urls)
	if fmt.Sprint(urls) != "[http://sm.test/only-here|2026-05-01 http://sm.test/p1 http://sm.test/p2]" {
		t.Errorf("sitemap URLs %v", urls)
	}
	mu.Lock()
	if n := len(arrivals["other.test"]); n != 0 {
		t.Errorf("%d requests to another domain's sitemap", n)
	}
	// robots.txt, index, huge, a, b, nested: six requests, one interval apart.
	ts := arrivals["sm.test"]
	if len(ts) != 6 {
		t.Errorf("%d requests to sm.test, want 6", len(ts))
	}
	for i := 1; i < len(ts); i++ {
		if g := ts[i].Sub(ts[i-1]); g < interval-15*time.Millisecond {
			t.Errorf("requests %d and %d %s apart, interval %s", i-1, i, g, interval)
		}
	}
	mu.Unlock()

	// No Sitemap line: /sitemap.xml.
	if a := run("plain.test", true); len(a.SitemapURLs) != 1 || !strings.HasSuffix(a.SitemapURLs[0].URL, "/q") {
		t.Errorf("fallback /sitemap.xml: %+v", a)
	}
	// robots.txt's Crawl-delay spaces the sitemap requests at once.
	if a := run("cd.test", true); len(a.SitemapURLs) != 1 {
		t.Errorf("cd.test: %+v", a)
	}
	mu.Lock()
	if ts := arrivals["cd.test"]; len(ts) != 2 || ts[1].Sub(ts[0]) < 250*time.Millisecond-15*time.Millisecond {
		t.Errorf("cd.test: requests at %v, want 250ms apart (Crawl-delay)", ts)
	}
	mu.Unlock()
	// Not XML: an error outcome, the job still succeeds (robots.txt 404: allow all).
	if a := run("junk.test", true); a.Verdict != crawl.RobotsAllowAll || len(a.Sitemaps) != 1 || a.Sitemaps[0].ErrorCode != crawl.ErrCodeNotSitemap || len(a.SitemapURLs) != 0 {
		t.Errorf("non-XML sitemap: %+v", a)
	}
	// Switched off: no sitemap request.
	mu.Lock()
	before := len(arrivals["plain.test"])
	mu.Unlock()
	if a := run("plain.test", false); len(a.Sitemaps) != 0 {
		t.Errorf("sitemaps off: %+v", a.Sitemaps)
	}
	mu.Lock()
	if n := len(arrivals["plain.test"]) - before; n != 1 {
		t.Errorf("sitemaps off: %d requests, want robots.txt only", n)
	}
	mu.Unlock()
}
