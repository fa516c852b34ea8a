package main_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/pipeline"
)

// TestPipelineRunCapDefaults: without flags, pipeline run shares seed
// 003's caps among the acquisitions its checks may make: 10 requests to
// one domain and 100 in all per run, 2 s between requests to a domain
// (two due sources of one site: 8 pages per domain left after the two
// checks, 4 each; 98 in all, 49 each). The flags change them; a negative
// cap is refused with one line.
func TestPipelineRunCapDefaults(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "farroctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := runner{bin: bin}
	spool := newSpool(t)
	for _, u := range []string{"http://site.test/a", "http://site.test/b"} {
		if res := r.run(t, spool, "", "source", "add", u); res.code != 0 {
			t.Fatalf("source add %s: %+v", u, res)
		}
	}
	budgets := func(args ...string) []*pipeline.RunBudget {
		t.Helper()
		res := r.run(t, spool, "", append([]string{"pipeline", "run", "--dry-run", "--json"}, args...)...)
		if res.code != 0 {
			t.Fatalf("pipeline run %v: %+v", args, res)
		}
		var rep pipeline.Report
		if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
			t.Fatalf("%v: %s", err, res.stdout)
		}
		var out []*pipeline.RunBudget
		for _, c := range rep.Checks {
			out = append(out, c.Budget)
		}
		return out
	}
	for _, tc := range []struct {
		args             []string
		pages, perDomain int64
		interval         time.Duration
	}{
		{nil, 49, 4, 2 * time.Second},
		{[]string{"--max-requests", "12", "--max-domain-requests", "0", "--min-domain-interval", "5s"}, 5, 0, 5 * time.Second},
		{[]string{"--max-domain-requests", "4"}, 49, 1, 2 * time.Second},
	} {
		bs := budgets(tc.args...)
		if len(bs) != 2 {
			t.Fatalf("%v: %d checks planned, want 2", tc.args, len(bs))
		}
		for _, b := range bs {
			if b == nil || b.MaxPages != tc.pages || b.MaxPagesPerDomain != tc.perDomain || b.Interval.D() != tc.interval {
				t.Errorf("%v: budget %+v, want %d pages, %d per domain, %s apart", tc.args, b, tc.pages, tc.perDomain, tc.interval)
			}
		}
	}
	res := r.run(t, spool, "", "pipeline", "run", "--dry-run", "--max-requests", "-1")
	if res.code != 2 || !oneErrorLine(res.stderr) {
		t.Errorf("negative cap: %+v", res)
	}
}
