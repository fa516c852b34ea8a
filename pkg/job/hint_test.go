package job_test

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

func hints(t *testing.T, s *job.Spool) []string {
	t.Helper()
	var out []string
	if err := s.ScanHints(func(prio int, id string) { out = append(out, job.HintName(prio, id)) }); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// Submit writes a hint for a priority other than the default, in every
// state a job may start in, and none for the default.
func TestSubmitWritesPriorityHints(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, r := range []job.SubmitRequest{
		{ID: "p0", Priority: 0}, {ID: "p5", Priority: 5}, {ID: "m2", Priority: -2},
		{ID: "held", Priority: 3, Held: true}, {ID: "later", Priority: 4, NotBefore: time.Now().Add(time.Hour)},
	} {
		r.Kind, r.Prompt = "exec", []byte(testPrompt)
		if _, err := s.Submit(r); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"-2.m2", "3.held", "4.later", "5.p5"}
	if got := hints(t, s); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("hints %v, want %v", got, want)
	}
	// The listing of incoming/ does not see the hints' directory.
	ents, err := os.ReadDir(s.StateDir(job.Queued))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "p0" && e.Name() != "p5" && e.Name() != "m2" && e.Name() != job.PriorityHintDir {
			t.Errorf("unexpected entry %s in incoming/", e.Name())
		}
	}
}

func TestParseHint(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]struct {
		prio int
		id   string
		ok   bool
	}{
		"5.a":            {5, "a", true},
		"-3.x.y":         {-3, "x.y", true},
		"0.a":            {},
		"5":              {},
		"x.a":            {},
		"5.":             {},
		"5.../etc":       {},
		"5.a.lock":       {},
		"99999999999.a":  {},
		"12.20261121T1-": {12, "20261121T1-", true},
	} {
		prio, id, ok := job.ParseHint(name)
		if prio != want.prio || id != want.id || ok != want.ok {
			t.Errorf("ParseHint(%q) = %d %q %v, want %d %q %v", name, prio, id, ok, want.prio, want.id, want.ok)
		}
	}
}

// A hint is dropped only once its job can no longer come back to
// incoming/ (gone or terminal) and it is older than a submit in flight.
func TestDropStaleHint(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, id := range []string{"q", "d"} {
		r := job.SubmitRequest{ID: id, Kind: "exec", Priority: 2, Prompt: []byte(testPrompt)}
		if id == "d" {
			r.NotBefore = time.Now().Add(time.Hour)
		}
		if _, err := s.Submit(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{job.HintName(2, "gone"), job.HintName(7, "fresh")} {
		if err := os.WriteFile(filepath.Join(s.HintDir(), name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * job.TempGrace)
	for _, name := range []string{job.HintName(2, "q"), job.HintName(2, "d"), job.HintName(2, "gone")} {
		if err := os.Chtimes(filepath.Join(s.HintDir(), name), old, old); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		prio int
		id   string
		drop bool
	}{{2, "q", false}, {2, "d", false}, {2, "gone", true}, {7, "fresh", false}, {9, "none", false}} {
		got, err := s.DropStaleHint(c.prio, c.id)
		if err != nil || got != c.drop {
			t.Errorf("DropStaleHint(%d, %s) = %v, %v; want %v", c.prio, c.id, got, err, c.drop)
		}
	}
	if got := hints(t, s); len(got) != 3 {
		t.Fatalf("hints left %v, want those of q, d and fresh", got)
	}
}

func TestIDTime(t *testing.T) {
	t.Parallel()
	s := setup(t)
	j, err := s.Submit(job.SubmitRequest{Kind: "exec", Prompt: []byte(testPrompt)})
	if err != nil {
		t.Fatal(err)
	}
	at, ok := job.IDTime(j.ID)
	if !ok || at.After(j.CreatedAt) || j.CreatedAt.Sub(at) > time.Second {
		t.Fatalf("IDTime(%s) = %v %v, created_at %v", j.ID, at, ok, j.CreatedAt)
	}
	for _, id := range []string{"j1", "20261121T114512.123456Z", "20261321T114512.123456Z-ab", "2026112xT114512.123456Z-ab"} {
		if _, ok := job.IDTime(id); ok {
			t.Errorf("IDTime(%q) ok, want not a time", id)
		}
	}
}
