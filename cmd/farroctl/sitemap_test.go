package main_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/job"
)

// TestFarroctlCrawlSitemaps: crawl start reads sitemaps unless told
// --sitemaps=false.
func TestFarroctlCrawlSitemaps(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "farroctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := runner{bin: bin}
	spool := newSpool(t)
	for name, want := range map[string]bool{"on": true, "off": false} {
		args := []string{"crawl", "start", name, "--seed", "http://a.test/"}
		if !want {
			args = append(args, "--sitemaps=false")
		}
		if res := r.run(t, spool, "", args...); res.code != 0 {
			t.Fatalf("%v: %+v", args, res)
		}
		st, err := crawl.Open(&job.Spool{Root: spool}, name)
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.Load()
		if err != nil {
			t.Fatal(err)
		}
		if c.Sitemaps != want {
			t.Errorf("%v: sitemaps %v, want %v", args, c.Sitemaps, want)
		}
	}
	if res := r.run(t, spool, "", "crawl", "start", "bad", "--seed", "http://a.test/", "--sitemaps=maybe"); res.code != 2 || !oneErrorLine(res.stderr) {
		t.Errorf("--sitemaps=maybe: %+v; want a usage error", res)
	}
}
