package manager

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// Segments of the event stream older than EventsRetention are removed
// (one info line says how many); newer ones and a retention of 0 keep
// them. A job removed by retention leaves a removed line in the stream.
func TestEventsRetention(t *testing.T) {
	t.Parallel()
	plant := func(t *testing.T, e *env) (oldSeg, newSeg string) {
		t.Helper()
		if err := os.MkdirAll(e.s.Path(job.StreamDir), 0o755); err != nil {
			t.Fatal(err)
		}
		oldSeg = job.StreamSegment(time.Now().Add(-10 * 24 * time.Hour))
		newSeg = job.StreamSegment(time.Now().Add(-2 * 24 * time.Hour))
		for _, n := range []string{oldSeg, newSeg} {
			if err := os.WriteFile(e.s.Path(job.StreamDir, n), []byte("{}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return oldSeg, newSeg
	}
	t.Run("on", func(t *testing.T) {
		t.Parallel()
		e := setup(t, Config{EventsRetention: DefaultEventsRetention, Retention: time.Nanosecond})
		oldSeg, newSeg := plant(t, e)
		e.submit(t, "done", 0)
		c, err := e.s.Claim("done", holder)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(job.Succeeded, "", nil); err != nil {
			t.Fatal(err)
		}
		e.runOnce(t)
		if _, err := os.Stat(e.s.Path(job.StreamDir, oldSeg)); !os.IsNotExist(err) {
			t.Fatalf("old segment kept: %v", err)
		}
		if _, err := os.Stat(e.s.Path(job.StreamDir, newSeg)); err != nil {
			t.Fatalf("new segment: %v", err)
		}
		var logged bool
		for _, l := range e.log.Lines(t) {
			if l["message"] == "event stream segments removed by retention" {
				logged = l["removed"] == float64(1) && l["oldest"] == oldSeg && l["events_retention_ms"] == float64(DefaultEventsRetention.Milliseconds())
			}
		}
		if !logged {
			t.Fatalf("no retention line: %s", e.log)
		}
		data, err := os.ReadFile(e.s.Path(job.StreamDir, job.StreamSegment(time.Now())))
		if err != nil || !strings.Contains(string(data), `"job_id":"done"`) || !strings.Contains(string(data), `"type":"removed","from":"succeeded"`) {
			t.Fatalf("no removed line for the expired job: %s %v", data, err)
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		e := setup(t, Config{})
		oldSeg, _ := plant(t, e)
		e.runOnce(t)
		if _, err := os.Stat(e.s.Path(job.StreamDir, oldSeg)); err != nil {
			t.Fatalf("EventsRetention 0 removed a segment: %v", err)
		}
	})
}
