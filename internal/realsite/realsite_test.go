package realsite

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestAnalyze reads an access log in the server's format and reports per
// client: HTML pages, duplicates, robots.txt and sitemap requests,
// requests robots.txt forbids, 404s; Diff lists the pages one fetched and
// the other did not.
func TestAnalyze(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &Server{AccessLog: filepath.Join(dir, "access.log")}
	log := `1700000000.100 200 70 "/robots.txt" "farro/1"
1700000000.200 404 150 "/sitemap.xml" "farro/1"
1700000000.300 200 9000 "/index.html" "farro/1"
1700000000.400 200 9000 "/a.html" "farro/1"
1700000000.500 200 9000 "/a.html" "farro/1"
1700000000.600 200 900 "/tutorial-start.html" "farro/1"
1700000000.700 404 150 "/x@y.org" "farro/1"
1700000001.000 200 70 "/robots.txt" "Wget/1.21.3"
1700000001.100 200 9000 "/index.html" "Wget/1.21.3"
1700000001.200 200 9000 "/b.html" "Wget/1.21.3"
1700000001.300 200 900 "/style.css" "Wget/1.21.3"
garbage
`
	if err := os.WriteFile(s.AccessLog, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	reqs, err := s.Log()
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 11 {
		t.Fatalf("%d requests read, want 11: %+v", len(reqs), reqs)
	}
	fr, wg := Analyze(reqs, "farro/"), Analyze(reqs, WgetUA)
	want := &Report{Requests: 7, HTML: map[string]int{"/index.html": 1, "/a.html": 2, "/tutorial-start.html": 1}, Duplicates: 1,
		Forbidden: []string{"/tutorial-start.html"}, Robots: 1, Sitemaps: 1, NotFound: 2, Seconds: 0.6}
	fr.Seconds = float64(int(fr.Seconds*10+0.5)) / 10
	if !reflect.DeepEqual(fr, want) {
		t.Errorf("farro's report:\n got %+v\nwant %+v", fr, want)
	}
	if wg.Requests != 4 || wg.Pages() != 2 || wg.Duplicates != 0 || len(wg.Forbidden) != 0 || wg.Robots != 1 {
		t.Errorf("wget's report: %+v", wg)
	}
	onlyF, onlyW := Diff(fr, wg)
	if !reflect.DeepEqual(onlyF, []string{"/a.html", "/tutorial-start.html"}) || !reflect.DeepEqual(onlyW, []string{"/b.html"}) {
		t.Errorf("Diff: only farro %v, only wget %v", onlyF, onlyW)
	}
}

// get fetches url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestServeOptions starts nginx over a small tree: by default it answers
// /robots.txt with RobotsTxt; with TreeRobots the tree's own file; TakeLog
// returns each request once.
func TestServeOptions(t *testing.T) {
	if NginxBin() == "" {
		t.Fatal("nginx is not installed: apt-get install nginx-light (or nginx)")
	}
	// nginx's workers run as nobody when the test runs as root: the
	// tree must be readable by all (t.TempDir's parent is not).
	root, err := os.MkdirTemp("", "realsite-tree-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "robots.txt"), []byte("User-agent: *\nDisallow: /own\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "page"), []byte("<p>hi</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		opts   []Option
		robots string
		ctype  string
	}{
		{"default", nil, RobotsTxt, "application/octet-stream"},
		{"tree", []Option{TreeRobots(), DefaultType("text/html")}, "User-agent: *\nDisallow: /own\n", "text/html"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Start(filepath.Join(t.TempDir(), "nginx"), root, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			if code, body := get(t, s.URL("/robots.txt")); code != 200 || body != tc.robots {
				t.Fatalf("robots.txt: %d %q, want %q", code, body, tc.robots)
			}
			resp, err := http.Get(s.URL("/page"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("Content-Type"); got != tc.ctype {
				t.Fatalf("Content-Type %q, want %q", got, tc.ctype)
			}
			// nginx writes the log line after the response: wait for both.
			var log []Request
			deadline := time.Now().Add(5 * time.Second)
			for len(log) < 2 && time.Now().Before(deadline) {
				more, err := s.TakeLog()
				if err != nil {
					t.Fatal(err)
				}
				log = append(log, more...)
				time.Sleep(10 * time.Millisecond)
			}
			if len(log) != 2 || log[0].URI != "/robots.txt" || log[1].URI != "/page" || log[1].Status != 200 {
				t.Fatalf("log %+v, want /robots.txt then /page", log)
			}
			get(t, s.URL("/page?again"))
			deadline = time.Now().Add(5 * time.Second)
			var again []Request
			for len(again) == 0 && time.Now().Before(deadline) {
				if again, err = s.TakeLog(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if len(again) != 1 || again[0].URI != "/page?again" {
				t.Fatalf("after TakeLog: %+v, want only /page?again", again)
			}
		})
	}
}
