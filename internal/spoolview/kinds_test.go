package spoolview

import (
	"path/filepath"
	"testing"

	"github.com/farro-dev/farro/pkg/job"
)

// The view counts queued jobs by kind, and forgets a kind once its last
// queued job has left incoming/.
func TestQueuedKinds(t *testing.T) {
	t.Parallel()
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	for id, kind := range map[string]string{"a": "noop", "b": "noop", "c": "my.kind"} {
		if _, err := s.Submit(job.SubmitRequest{ID: id, Kind: kind, Prompt: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	v := New(s, Config{})
	if err := v.Scan(); err != nil {
		t.Fatal(err)
	}
	if got := v.Snapshot().QueuedKinds; len(got) != 2 || got["noop"] != 2 || got["my.kind"] != 1 {
		t.Fatalf("QueuedKinds %v, want noop 2, my.kind 1", got)
	}
	c, err := s.Claim("c", job.Holder{Actor: "agentd/t", Agent: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	if err := v.Scan(); err != nil {
		t.Fatal(err)
	}
	if got := v.Snapshot().QueuedKinds; len(got) != 1 || got["noop"] != 2 {
		t.Fatalf("QueuedKinds %v after c left, want noop 2 only", got)
	}
}
