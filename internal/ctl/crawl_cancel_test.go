package ctl_test

import (
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/job"
)

// TestCrawlCancelJobs: crawl cancel kills the crawl's jobs nobody runs
// (queued, held, failed), asks its running one to stop, and leaves its
// finished jobs and another crawl's jobs alone.
func TestCrawlCancelJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.newCrawlWithDomains("cc", "a.test")
	e.newCrawlWithDomains("other", "b.test")
	id := func(name, path string) string { return crawl.FetchJobID(name, "http://a.test/"+path) }
	fetch := func(r *job.SubmitRequest) { r.Kind = crawl.KindFetch }
	for _, p := range []string{"q1", "q2", "held"} {
		e.submit(id("cc", p), fetch)
	}
	e.submit(id("other", "q"), fetch)
	if _, err := e.s.Move(id("cc", "held"), job.Queued, job.Held, "test", "held", nil); err != nil {
		t.Fatal(err)
	}
	running := e.claim(id("cc", "running"))
	done := e.claim(id("cc", "done"))
	if err := done.Commit(job.Succeeded, "fetched", nil); err != nil {
		t.Fatal(err)
	}

	if err := e.ctl("").CrawlCancel("cc"); err != nil {
		t.Fatalf("crawl cancel: %v (%s)", err, e.stderr)
	}
	if out := e.stdout.String(); !strings.Contains(out, "cc: running -> cancelled; 3 jobs killed, 1 running jobs asked to stop") {
		t.Errorf("output %q", out)
	}
	for p, want := range map[string]job.State{"q1": job.Killed, "q2": job.Killed, "held": job.Killed, "running": job.InProgress, "done": job.Succeeded} {
		locs, err := e.s.Locate(id("cc", p))
		if err != nil || len(locs) != 1 || locs[0].State != want {
			t.Errorf("%s: %v %v, want %s", p, locs, err, want)
		}
	}
	if locs, err := e.s.Locate(id("other", "q")); err != nil || locs[0].State != job.Queued {
		t.Errorf("another crawl's job: %v %v, want it queued", locs, err)
	}
	c, err := running.PendingControl()
	if err != nil || c == nil || c.Action != job.ControlCancel {
		t.Errorf("the running job's holder sees %+v, %v; want a cancel", c, err)
	}
}
