package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/job"
)

// TestCrawlStartFilters: crawl start's filter flags land in crawl.json
// (a regular expression's commas kept), bad ones are refused with one
// line and nothing written, and why names the filter that decides.
func TestCrawlStartFilters(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "farroctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := runner{bin: bin}
	spool := newSpool(t)
	res := r.run(t, spool, "", "crawl", "start", "fl", "--seed", "http://a.test/",
		"--accept-regex", `/docs/[a-z]{1,3}/`, "--accept-prefix", "/blog/", "--reject-regex", `\.(png|jpe?g)$`,
		"--reject-prefix", "/docs/private/", "--content-types", "text/html,application/xhtml+xml", "--content-types", "image/*",
		"--ignore-nofollow", "--ignore-robots-meta")
	if res.code != 0 || strings.TrimSpace(res.stdout) != "fl" {
		t.Fatalf("crawl start: %+v", res)
	}
	s, err := job.Open(spool)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(s, "fl")
	cr, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := crawl.Filters{AcceptRegex: []string{`/docs/[a-z]{1,3}/`}, AcceptPrefix: []string{"/blog/"}, RejectRegex: []string{`\.(png|jpe?g)$`},
		RejectPrefix: []string{"/docs/private/"}, ContentTypes: []string{"text/html", "application/xhtml+xml", "image/*"}, IgnoreNofollow: true, IgnoreRobotsMeta: true}
	if !reflect.DeepEqual(cr.Filters, want) {
		t.Errorf("crawl.json filters: %+v, want %+v", cr.Filters, want)
	}
	// Without flags: no filter, every type, robots meta obeyed.
	if res := r.run(t, spool, "", "crawl", "start", "plain", "--seed", "http://a.test/"); res.code != 0 {
		t.Fatalf("crawl start plain: %+v", res)
	}
	st2, _ := crawl.Open(s, "plain")
	if cr, err := st2.Load(); err != nil || !reflect.DeepEqual(cr.Filters, crawl.Filters{}) {
		t.Errorf("default filters: %+v, %v", cr, err)
	}

	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--reject-regex", "(unclosed"}, `--reject-regex "(unclosed"`},
		{[]string{"--accept-prefix", "docs/"}, "neither a path starting with / nor an http(s) URL"},
		{[]string{"--content-types", "html"}, `--content-types "html": want TYPE/SUBTYPE`},
	} {
		args := append([]string{"crawl", "start", "bad", "--seed", "http://a.test/"}, c.args...)
		res := r.run(t, spool, "", args...)
		if res.code == 0 || !oneErrorLine(res.stderr) || !strings.Contains(res.stderr, c.says) {
			t.Errorf("%v: %+v; want one error line saying %q", c.args, res, c.says)
		}
		if _, err := os.Stat(filepath.Join(spool, "crawls", "bad")); err == nil {
			t.Errorf("%v: the refused crawl left crawls/bad", c.args)
		}
	}

	for u, says := range map[string]string{
		"http://a.test/docs/private/x/": "http://a.test/docs/private/x/: filtered: matches --reject-prefix /docs/private/ (links to it are dropped when found)\n",
		"http://a.test/docs/abc/x.png":  "http://a.test/docs/abc/x.png: filtered: matches --reject-regex \\.(png|jpe?g)$ (links to it are dropped when found)\n",
		"http://a.test/about":           "http://a.test/about: filtered: matches no --accept-regex or --accept-prefix (links to it are dropped when found)\n",
		"http://a.test/":                "http://a.test/: never seen: no fetched page links to it (yet)\n", // a seed: exempt
		"http://a.test/blog/1":          "http://a.test/blog/1: never seen: no fetched page links to it (yet)\n",
	} {
		res := r.run(t, spool, "", "why", "fl", u)
		if res.code != 0 || res.stdout != says {
			t.Errorf("why %s: %+v, want %q", u, res, says)
		}
	}
}
