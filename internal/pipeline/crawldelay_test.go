package pipeline_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/pipeline/livesite"
	"github.com/farro-dev/farro/pkg/job"
)

// TestCheckWaitsCrawlDelay: a source check honours the robots.txt
// Crawl-delay of its site when it is longer than the run's interval: the
// check's request goes out at least the Crawl-delay after the robots.txt
// request before it (the site's access log).
func TestCheckWaitsCrawlDelay(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	defer e.stop()
	host := "delay.test"
	e.site.SetMode(host, livesite.ETag)
	e.site.SetRobots(host, "User-agent: *\nCrawl-delay: 0.5\nDisallow: /private\n")
	e.site.Set(host, "/page", livesite.Page("page"))
	e.addSource("d", host, "/page", nil)
	b, _ := json.Marshal(pipeline.CheckPrompt{Source: "d", MinIntervalMS: 20})
	h := pipeline.NewCheckHandler(e.spool, nil)
	res := h.Run(context.Background(), agent.Task{Env: job.Envelope{Prompt: b,
		Lifecycle: &job.Job{ID: "c-d-000000000000000000000000", Attempts: 1}, Runtime: job.Runtime{Dir: t.TempDir()}}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var robotsAt, pageAt time.Time
	for _, r := range e.site.Log() {
		switch {
		case r.Host == host && r.Path == "/robots.txt":
			robotsAt = r.At
		case r.Host == host && r.Path == "/page":
			pageAt = r.At
		}
	}
	if robotsAt.IsZero() || pageAt.IsZero() {
		t.Fatalf("requests logged: robots.txt at %v, page at %v", robotsAt, pageAt)
	}
	if d := pageAt.Sub(robotsAt); d < 500*time.Millisecond-20*time.Millisecond {
		t.Errorf("the check went out %s after robots.txt, want the Crawl-delay (500ms)", d)
	}
	if s := e.source("d"); s.Checks != 1 {
		t.Errorf("source after the check: %d checks, error %q", s.Checks, s.LastError)
	}
}
