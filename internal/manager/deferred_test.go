package manager

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// deferMany submits n jobs named prefix0000... due at due(i), and dates
// their directories back a minute (deferred a while ago).
func deferMany(t testing.TB, s *job.Spool, prefix string, n int, due func(i int) time.Time) {
	t.Helper()
	back := time.Now().Add(-time.Minute)
	for lo := 0; lo < n; lo += 1000 {
		reqs := make([]job.SubmitRequest, 0, 1000)
		for i := lo; i < min(n, lo+1000); i++ {
			reqs = append(reqs, job.SubmitRequest{ID: fmt.Sprintf("%s%06d", prefix, i), Kind: "noop", Prompt: []byte(`{}`), NotBefore: due(i)})
		}
		_, errs := s.SubmitMany(reqs)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range reqs {
			if err := os.Chtimes(s.JobDir(job.Deferred, "", r.ID), back, back); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// With more deferred jobs than DeferredCap, the schedule keeps the
// earliest (never more than twice the cap), fills itself again as it
// drains, and every job is promoted in due order: nothing is forgotten.
func TestDeferredScheduleIsBoundedAndForgetsNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{DeferredCap: 4})
	start := time.Now().Add(300 * time.Millisecond)
	const n = 30
	// IDs in reverse due order, so that name order is no help.
	deferMany(t, e.s, "d", n, func(i int) time.Time { return start.Add(time.Duration(n-i) * 15 * time.Millisecond) })
	e.runOnce(t)
	if got := e.m.sched.len(); got > 8 {
		t.Fatalf("schedule holds %d jobs with a cap of 4, want at most 8", got)
	}
	if at, ok := e.m.sched.next(); !ok || !at.Equal(start.Add(15*time.Millisecond)) {
		t.Fatalf("earliest kept due %v (%v), want the earliest job's %v", at, ok, start.Add(15*time.Millisecond))
	}
	var order []string
	eventually(t, 10*time.Second, "every deferred job promoted", func() bool {
		e.runOnce(t)
		if got := e.m.sched.len(); got > 8 {
			t.Fatalf("schedule holds %d jobs with a cap of 4, want at most 8", got)
		}
		for _, l := range e.log.Lines(t) {
			ev, _ := l["event"].(map[string]any)
			if ev["type"] == "state_transition" && ev["from"] == "deferred" && ev["to"] == "queued" {
				if id, _ := l["job_id"].(string); !contains(order, id) {
					order = append(order, id)
				}
			}
		}
		return len(order) == n
	})
	for i := 1; i < len(order); i++ {
		if order[i-1] < order[i] { // later IDs are due earlier
			t.Fatalf("promoted out of due order: %v", order)
		}
	}
}

// A rescan costs an lstat per name of its chunk and reads no job.json
// of a job it knows, nor of one a full schedule left beyond its horizon.
func TestDeferredRescanReadsNothingUnchanged(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{DeferredCap: 8, RescanChunk: 10})
	deferMany(t, e.s, "d", 40, func(i int) time.Time { return time.Now().Add(time.Hour + time.Duration(i)*time.Second) })
	e.runOnce(t) // the fill reads every job once
	if e.m.reads != 40 {
		t.Fatalf("the fill read %d job.json, want 40", e.m.reads)
	}
	for pass := range 5 {
		reads, stats := e.m.reads, e.m.stats
		e.runOnce(t)
		if r := e.m.reads - reads; r != 0 {
			t.Fatalf("rescan %d read %d job.json of unchanged deferred jobs, want 0", pass, r)
		}
		if s := e.m.stats - stats; s > 10 {
			t.Fatalf("rescan %d made %d lstats, want at most RescanChunk (10)", pass, s)
		}
	}
}

// managerd is ready before it has read deferred/: the fill goes on in
// steps after its first pass.
func TestRunIsReadyBeforeDeferredIsRead(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{FillChunk: 5})
	deferMany(t, e.s, "d", 60, func(i int) time.Time { return time.Now().Add(time.Hour) })
	readsAtReady := int64(-1)
	ready := make(chan struct{})
	e.m.cfg.Ready = func() { // on the loop's goroutine
		readsAtReady = e.m.reads
		close(ready)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.m.Run(ctx) }()
	eventually(t, 10*time.Second, "the schedule filled", func() bool {
		return strings.Contains(e.log.String(), "deferred schedule filled")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-ready
	if readsAtReady != 0 {
		t.Fatalf("ready after reading %d deferred job.json, want 0", readsAtReady)
	}
	if e.m.reads != 60 || e.m.sched.len() != 60 {
		t.Fatalf("the fill read %d job.json and kept %d, want 60 and 60", e.m.reads, e.m.sched.len())
	}
}
