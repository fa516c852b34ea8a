package manager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// BenchmarkDeferredPass measures managerd's periodic pass (RunOnce after
// the first) over a deferred/ of FARRO_BENCH_DEFERRED jobs (default
// 10000; the figures in bench/README.md are at 100000), and reports the
// job.json reads and the lstats of deferred jobs per pass, and the jobs
// the schedule keeps in memory.
func BenchmarkDeferredPass(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("FARRO_BENCH_DEFERRED")); err == nil && v > 0 {
		n = v
	}
	s, err := job.Open(filepath.Join(b.TempDir(), "spool"))
	if err != nil {
		b.Fatal(err)
	}
	writeDeferred(b, s, n)
	m := New(spoolstore.New(s), Config{}, zerolog.Nop())
	ctx := context.Background()
	if err := m.RunOnce(ctx); err != nil { // the first pass fills the schedule
		b.Fatal(err)
	}
	fill := m.reads
	reads, stats := m.reads, m.stats
	b.ResetTimer()
	for range b.N {
		if err := m.RunOnce(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(m.reads-reads)/float64(b.N), "reads/pass")
	b.ReportMetric(float64(m.stats-stats)/float64(b.N), "lstats/pass")
	b.ReportMetric(float64(m.sched.len()), "kept")
	b.ReportMetric(float64(fill), "fill-reads")
}

// writeDeferred writes n deferred jobs, due in an hour and later, the
// way Submit lays them out but without its fsyncs, and dates their
// directories back a minute.
func writeDeferred(b *testing.B, s *job.Spool, n int) {
	b.Helper()
	now := time.Now().UTC()
	back := now.Add(-time.Minute)
	for i := range n {
		id := fmt.Sprintf("d%07d", i)
		nb := now.Add(time.Hour + time.Duration(i)*time.Millisecond)
		j := &job.Job{SchemaVersion: job.SchemaVersion, ID: id, Kind: "noop", Status: job.Deferred,
			CreatedAt: now, UpdatedAt: now, NotBefore: &nb}
		dir := s.JobDir(job.Deferred, "", id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, job.PromptFile), []byte("{}"), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, job.JobFile), j.Marshal(), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Chtimes(dir, back, back); err != nil {
			b.Fatal(err)
		}
	}
}
