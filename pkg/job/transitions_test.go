package job_test

import (
	"testing"

	"github.com/farro-dev/farro/pkg/job"
)

// Transitions is the map CanTransition checks, and a copy: a caller that
// edits it changes nothing.
func TestTransitionsIsACopyOfTheMap(t *testing.T) {
	t.Parallel()
	m := job.Transitions()
	if len(m) != len(job.States) {
		t.Fatalf("Transitions has %d states, want %d", len(m), len(job.States))
	}
	for _, from := range job.States {
		for _, to := range job.States {
			in := false
			for _, s := range m[from] {
				in = in || s == to
			}
			if in != job.CanTransition(from, to) {
				t.Errorf("%s -> %s: in Transitions %v, CanTransition %v", from, to, in, job.CanTransition(from, to))
			}
		}
	}
	m[job.Succeeded] = append(m[job.Succeeded], job.Queued)
	m[job.Queued][0] = job.Succeeded
	if job.CanTransition(job.Succeeded, job.Queued) || !job.CanTransition(job.Queued, job.InProgress) {
		t.Fatal("editing the returned map changed the legal transitions")
	}
}
