package main_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// crawl export's WARC flags: --warc DIR writes into DIR (here an empty
// crawl: no file), a bad --warc-max-size or one without --warc is a usage
// error in one line (exit 2).
func TestCrawlExportWARCFlags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "farroctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := runner{bin: bin}
	spool := newSpool(t)
	if res := r.run(t, spool, "", "crawl", "start", "w", "--seed", "http://a.test/"); res.code != 0 {
		t.Fatalf("crawl start: %+v", res)
	}
	dir := filepath.Join(t.TempDir(), "out")
	res := r.run(t, spool, "", "crawl", "export", "w", "--warc", dir, "--warc-max-size", "64MiB")
	if res.code != 0 || res.stdout != "0 URLs, 0 records, 0 files\n" {
		t.Fatalf("export --warc: %+v", res)
	}
	for _, args := range [][]string{
		{"crawl", "export", "w", "--warc", dir, "--warc-max-size", "lots"},
		{"crawl", "export", "w", "--warc", dir, "--warc-max-size", "0"},
		{"crawl", "export", "w", "--warc-max-size", "1MiB"},
	} {
		res := r.run(t, spool, "", args...)
		if res.code != 2 || !oneErrorLine(res.stderr) || !strings.Contains(res.stderr, "--warc-max-size") {
			t.Errorf("%v: %+v", args, res)
		}
	}
	if res := r.run(t, spool, "", "crawl", "export", "w"); res.code != 0 || res.stdout != "" {
		t.Errorf("JSON export unchanged: %+v", res)
	}
}
