package fetch

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

func TestRobotsDirectivesParsing(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   []string
	}{
		{[]string{"noindex"}, []string{"noindex"}},
		{[]string{"NoIndex, NOFOLLOW"}, []string{"noindex", "nofollow"}},
		{[]string{"none"}, []string{"none"}},
		{[]string{"otherbot: noindex, nofollow"}, nil},
		{[]string{"otherbot: noindex", "nofollow"}, []string{"nofollow"}}, // one header per value
		{[]string{"farro-test: nofollow, otherbot: noindex"}, []string{"nofollow"}},
		{[]string{"unavailable_after: 25 Jun 2010 15:00:00 PST", "max-snippet: 20, noindex"}, []string{"noindex"}},
	} {
		if got := headerDirectives(c.values, "farro-test"); !reflect.DeepEqual(got, c.want) {
			t.Errorf("headerDirectives(%q) = %q, want %q", c.values, got, c.want)
		}
	}
	for _, c := range []struct {
		html string
		want []string
	}{
		{`<head><meta name="robots" content="noindex, nofollow"></head>`, []string{"noindex", "nofollow"}},
		{`<meta name="ROBOTS" content=" None ">`, []string{"none"}},
		{`<meta name="farro-test" content="nofollow"><meta name="otherbot" content="noindex">`, []string{"nofollow"}},
		{`<meta content="noindex" name="robots"/>`, []string{"noindex"}},
		{`<head></head><body><meta name="robots" content="noindex"></body>`, nil}, // only before <body>
		{`<meta name="description" content="noindex">`, nil},
	} {
		if got := metaDirectives([]byte(c.html), "farro-test"); !reflect.DeepEqual(got, c.want) {
			t.Errorf("metaDirectives(%s) = %q, want %q", c.html, got, c.want)
		}
	}
	links, dropped := extractLinks("http://h.test/", []byte(`<a href="/a" rel="nofollow">a</a><a href="/b" rel="external NoFollow">b</a>
		<link rel="canonical nofollow" href="/c"><area href="/d" rel="nofollow"><a href="/e">e</a>`), true)
	if !reflect.DeepEqual(links, []string{"http://h.test/e"}) || dropped != 4 {
		t.Errorf("rel=nofollow: %q, %d dropped", links, dropped)
	}
	if links := ExtractLinks("http://h.test/", []byte(`<a href="/a" rel="nofollow">a</a>`)); len(links) != 1 {
		t.Errorf("ExtractLinks keeps nofollow links: %q", links)
	}
}

// TestFetchDirectives fetches pages with each robots-meta form and a type
// outside the content types from a loopback server.
func TestFetchDirectives(t *testing.T) {
	mux := http.NewServeMux()
	html := func(w http.ResponseWriter, head, body string) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><head>%s</head><body>%s</body></html>", head, body)
	}
	mux.HandleFunc("/meta-nofollow", func(w http.ResponseWriter, r *http.Request) {
		html(w, `<meta name="robots" content="nofollow">`, `<a href="/x">x</a>`)
	})
	mux.HandleFunc("/meta-noindex", func(w http.ResponseWriter, r *http.Request) {
		html(w, `<meta name="robots" content="noindex">`, `<a href="/x">x</a>`)
	})
	mux.HandleFunc("/meta-none", func(w http.ResponseWriter, r *http.Request) {
		html(w, `<meta name="robots" content="none">`, `<a href="/x">x</a>`)
	})
	mux.HandleFunc("/header-none", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Robots-Tag", "none")
		html(w, "", `<a href="/x">x</a>`)
	})
	mux.HandleFunc("/header-pdf", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Robots-Tag", "noindex")
		w.Header().Set("Content-Type", "application/pdf")
		fmt.Fprint(w, "%PDF-1.4")
	})
	mux.HandleFunc("/rel", func(w http.ResponseWriter, r *http.Request) {
		html(w, "", `<a href="/x">x</a><a rel="nofollow" href="/y">y</a>`)
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		// The headers, then a body that comes only if the client waits
		// past its 2 s timeout.
		w.Header().Set("Content-Type", "image/png")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
			fmt.Fprint(w, "PNG")
		}
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.WriteHeader(404)
		fmt.Fprint(w, "no such image")
	})
	hs := newHarness(t, mux)
	type want struct {
		noindex, nofollow bool
		links, relDropped int
		directives        string
	}
	for _, c := range []struct {
		path   string
		mutate func(*crawl.FetchPrompt)
		want   want
	}{
		{"/meta-nofollow", nil, want{nofollow: true, directives: "meta: nofollow"}},
		{"/meta-noindex", nil, want{noindex: true, links: 1, directives: "meta: noindex"}},
		{"/meta-none", nil, want{noindex: true, nofollow: true, directives: "meta: none"}},
		{"/header-none", nil, want{noindex: true, nofollow: true, directives: "header: none"}},
		{"/header-pdf", nil, want{noindex: true, directives: "header: noindex"}},
		{"/rel", nil, want{links: 1, relDropped: 1}},
		{"/meta-none", func(p *crawl.FetchPrompt) { p.IgnoreRobotsMeta = true }, want{links: 1}},
		{"/header-none", func(p *crawl.FetchPrompt) { p.IgnoreRobotsMeta = true }, want{links: 1}},
		{"/rel", func(p *crawl.FetchPrompt) { p.IgnoreNofollow = true }, want{links: 2}},
	} {
		a, err := hs.run(hs.h, hs.prompt(c.path, c.mutate))
		got := want{a.Noindex, a.Nofollow, len(a.Links), a.NofollowLinks, a.RobotsDirectives}
		if err != nil || a.Outcome != crawl.OutcomeFetched || got != c.want || a.BodyBytes == 0 {
			t.Errorf("%s: %+v (artifact %+v, %v), want %+v", c.path, got, a, err, c.want)
		}
	}

	html2 := func(p *crawl.FetchPrompt) { p.ContentTypes = []string{"text/html", "application/xhtml+xml"} }
	start := time.Now()
	a, err := hs.run(hs.h, hs.prompt("/image", html2))
	if err != nil || a.Outcome != crawl.OutcomeFetched || a.HTTPStatus != 200 || a.ErrorCode != crawl.ErrCodeContentType ||
		a.BodyBytes != 0 || a.SHA256 != "" || a.ContentType != "image/png" || !strings.Contains(a.Error, "body not downloaded") {
		t.Errorf("rejected type: %+v, %v", a, err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("the rejected body was waited for: %s", d)
	}
	// Accepted types and non-2xx responses are read as before.
	a, err = hs.run(hs.h, hs.prompt("/missing", html2))
	if err != nil || a.HTTPStatus != 404 || a.ErrorCode != "" || a.BodyBytes != int64(len("no such image")) {
		t.Errorf("404 of another type: %+v, %v", a, err)
	}
	a, err = hs.run(hs.h, hs.prompt("/rel", html2))
	if err != nil || a.ErrorCode != "" || len(a.Links) != 1 {
		t.Errorf("accepted type: %+v, %v", a, err)
	}
	a, err = hs.run(hs.h, hs.prompt("/header-pdf", func(p *crawl.FetchPrompt) { p.ContentTypes = []string{"application/*"} }))
	if err != nil || a.ErrorCode != "" || a.BodyBytes == 0 {
		t.Errorf("type/* accepted: %+v, %v", a, err)
	}
}
