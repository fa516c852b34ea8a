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

// TestCrawlStartPageRequisites: --page-requisites lands in crawl.json
// (comma-separated or repeated, in a fixed order), is off by default, and
// an unknown kind is refused with one line and nothing written.
func TestCrawlStartPageRequisites(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "farroctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := runner{bin: bin}
	spool := newSpool(t)
	s, err := job.Open(spool)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		args []string
		want []string
	}{
		"all":   {[]string{"--page-requisites", "scripts,images", "--page-requisites", "css"}, []string{"images", "css", "scripts"}},
		"plain": {nil, nil},
	} {
		res := r.run(t, spool, "", append([]string{"crawl", "start", name, "--seed", "http://a.test/"}, c.args...)...)
		if res.code != 0 {
			t.Fatalf("crawl start %s: %+v", name, res)
		}
		st, _ := crawl.Open(s, name)
		cr, err := st.Load()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cr.PageRequisites, c.want) {
			t.Errorf("%s: page_requisites %q, want %q", name, cr.PageRequisites, c.want)
		}
	}
	res := r.run(t, spool, "", "crawl", "start", "bad", "--seed", "http://a.test/", "--page-requisites", "images,fonts")
	if res.code == 0 || !oneErrorLine(res.stderr) || !strings.Contains(res.stderr, `page requisite "fonts": must be images, css or scripts`) {
		t.Errorf("unknown kind: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(spool, "crawls", "bad")); err == nil {
		t.Error("the refused crawl left crawls/bad")
	}
}
