package ctl_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

// A FIFO planted as a job's events.jsonl is an error for history (and the
// dashboard's history), never a read that blocks.
func TestHistoryRefusesFIFO(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j1", nil)
	p := filepath.Join(e.s.JobDir(job.Queued, "", "j1"), job.EventsFile)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	c := e.ctl("")
	errc := make(chan error, 2)
	go func() { errc <- c.History([]string{"j1"}, ctl.HistoryOptions{}) }()
	go func() { _, err := c.HistoryOf("j1"); errc <- err }()
	for range 2 {
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("history of a FIFO: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("history blocked on a FIFO events.jsonl")
		}
	}
}

// HistoryOf gives history's rows; ShapeOf gives stats --ages' buckets
// with the kinds of each state.
func TestHistoryOfAndShapeOf(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("j1", nil)
	e.submit("j2", func(r *job.SubmitRequest) { r.Kind = "exec"; r.Held = true })
	c := e.ctl("")
	h, err := c.HistoryOf("j2")
	if err != nil || len(h) != 1 || h[0].To != job.Held || h[0].Bad != "" {
		t.Fatalf("HistoryOf: %v %+v", err, h)
	}
	sh, err := c.ShapeOf()
	if err != nil {
		t.Fatal(err)
	}
	if sh.Kinds[job.Queued]["noop"] != 1 || sh.Kinds[job.Held]["exec"] != 1 || sh.Ages[job.Held].Buckets[0].Count != 1 {
		t.Errorf("ShapeOf: kinds %v", sh.Kinds)
	}
	ages, err := ctl.Ages(e.s, time.Now())
	if err != nil || ages[job.Queued].Total != sh.Ages[job.Queued].Total {
		t.Errorf("Ages and ShapeOf disagree: %v", err)
	}
}
