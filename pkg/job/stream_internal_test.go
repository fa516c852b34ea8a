package job

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A writer keeps its segment open for the hour (no open per line) and
// moves to the next segment when the hour changes, with no coordination.
func TestStreamRotatesByHourAndCachesTheSegment(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 11, 24, 14, 59, 58, 0, time.UTC)
	s.stream.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	audit := func(cmd string) {
		t.Helper()
		if err := s.Audit(Audit{Command: cmd}); err != nil {
			t.Fatal(err)
		}
	}
	audit("first")
	first := s.Path(StreamDir, "2026-11-24T14.jsonl")
	if _, err := os.Stat(first); err != nil {
		t.Fatal(err)
	}
	// Unlinked under the writer: a writer that opened per line would
	// make it again; the cached descriptor writes on into the old inode.
	if err := os.Remove(first); err != nil {
		t.Fatal(err)
	}
	audit("second")
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Fatalf("the segment was opened again within its hour: %v", err)
	}
	mu.Lock()
	now = now.Add(3 * time.Second)
	mu.Unlock()
	audit("third")
	data, err := os.ReadFile(s.Path(StreamDir, "2026-11-24T15.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(data), "\n") != 1 || !strings.Contains(string(data), `"command":"third"`) {
		t.Fatalf("next hour's segment: %q", data)
	}
	if n := s.StreamFailures(); n != 0 {
		t.Fatalf("%d failures", n)
	}
}
