package job_test

import (
	"path/filepath"
	"testing"

	"github.com/farro-dev/farro/pkg/job"
)

// benchSpool opens a fresh spool for a benchmark.
func benchSpool(b *testing.B) *job.Spool {
	b.Helper()
	s, err := job.Open(filepath.Join(b.TempDir(), "spool"))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkSubmit is one Submit per op: the build in tmp/, two barriers
// (syncfs) and the rename, as farroctl submit pays for one job.
func BenchmarkSubmit(b *testing.B) {
	s := benchSpool(b)
	for b.Loop() {
		if _, err := s.Submit(job.SubmitRequest{Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubmitMany is one SubmitMany of 256 jobs per op (farroctl
// submit --batch's chunk), reported per job: there the two barriers are
// shared and the per-build cost (mkdir, three files, the build's lock,
// the rename) shows.
func BenchmarkSubmitMany(b *testing.B) {
	const batch = 256
	s := benchSpool(b)
	reqs := make([]job.SubmitRequest, batch)
	n := 0
	for b.Loop() {
		for i := range reqs {
			reqs[i] = job.SubmitRequest{Kind: "noop", Prompt: []byte(`{}`)}
		}
		_, errs := s.SubmitMany(reqs)
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		n += batch
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/job")
}
