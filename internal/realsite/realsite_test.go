package realsite

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
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
