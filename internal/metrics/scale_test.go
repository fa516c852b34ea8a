//go:build farroscale

package metrics_test

// A manual measurement, not a CI test (it builds a spool of 1.1 million
// job directories, which takes minutes):
//
//	FARRO_SCALE_DIR=/var/tmp/farro-scale go test -tags farroscale -run TestScale -v ./internal/metrics/
//
// It reports the cost of a full listing of the spool by the view, the
// view's memory, and the cost of a scrape, next to the same scrape of an
// empty spool: the two must be alike.

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/metrics"
	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/pkg/job"
)

func gatherCost(t *testing.T, v *spoolview.View) time.Duration {
	reg := metrics.SpoolRegistry(metrics.Farroctl, v)
	start := time.Now()
	for range 1000 {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	return time.Since(start) / 1000
}

func TestScale(t *testing.T) {
	dir := os.Getenv("FARRO_SCALE_DIR")
	if dir == "" {
		t.Skip("set FARRO_SCALE_DIR")
	}
	s, err := job.Open(filepath.Join(dir, "spool"))
	if err != nil {
		t.Fatal(err)
	}
	const nDone, nQueued = 1000000, 100000
	if ents, _ := os.ReadDir(s.StateDir(job.Succeeded)); len(ents) < nDone {
		start := time.Now()
		for i := len(ents); i < nDone; i++ {
			if err := os.Mkdir(filepath.Join(s.StateDir(job.Succeeded), fmt.Sprintf("j%07d", i)), 0o755); err != nil && !os.IsExist(err) {
				t.Fatal(err)
			}
		}
		now := time.Now().UTC()
		for i := range nQueued {
			id := fmt.Sprintf("q%07d", i)
			d := s.JobDir(job.Queued, "", id)
			_ = os.Mkdir(d, 0o755)
			j := &job.Job{SchemaVersion: job.SchemaVersion, ID: id, Kind: "noop", Status: job.Queued,
				CreatedAt: now.Add(time.Duration(i) * time.Millisecond), UpdatedAt: now}
			if err := os.WriteFile(filepath.Join(d, job.JobFile), j.Marshal(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("spool built in %v", time.Since(start))
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	v := spoolview.New(s, spoolview.Config{})
	start := time.Now()
	if err := v.Scan(); err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	start = time.Now()
	if err := v.Scan(); err != nil {
		t.Fatal(err)
	}
	again := time.Since(start)
	snap := v.Snapshot()
	empty := spoolview.New(&job.Spool{Root: t.TempDir()}, spoolview.Config{})
	if err := empty.Scan(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d succeeded, %d queued: first listing %v (reads the queued job.json), relisting %v, view heap %d MB",
		snap.States[job.Succeeded], snap.States[job.Queued], first.Round(time.Millisecond), again.Round(time.Millisecond),
		(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))>>20)
	t.Logf("scrape: %v with this spool, %v with an empty one", gatherCost(t, v), gatherCost(t, empty))
}
