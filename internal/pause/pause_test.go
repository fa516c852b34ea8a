package pause

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/fsq/fsqtest"
)

func TestValidateKind(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"noop", "exec", "crawl.fetch", "source.check", "a-b_c"} {
		if err := ValidateKind(ok); err != nil {
			t.Errorf("ValidateKind(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/b", "..", ".x", "../etc", "Noop", "x y", strings.Repeat("a", 65)} {
		if err := ValidateKind(bad); !errors.Is(err, ErrKind) {
			t.Errorf("ValidateKind(%q) = %v, want ErrKind", bad, err)
		}
	}
}

// Pause writes paused/<kind> with who, when and why; a second pause
// replaces it and returns the first; Resume removes it, once.
func TestPauseListResume(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if ks, ign, err := Kinds(root); err != nil || ks != nil || ign != nil {
		t.Fatalf("no paused/: %q %v %v", ks, ign, err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if prev, err := Pause(root, Entry{Kind: "noop", PausedAt: at, Actor: "farroctl", User: "ann", Reason: "db down"}); err != nil || prev != nil {
		t.Fatalf("Pause: %v %v", prev, err)
	}
	prev, err := Pause(root, Entry{Kind: "noop", PausedAt: at.Add(time.Minute), Actor: "farroctl", Reason: "still"})
	if err != nil || prev == nil || prev.Reason != "db down" || prev.User != "ann" || !prev.PausedAt.Equal(at) {
		t.Fatalf("second Pause: %+v %v", prev, err)
	}
	if _, err := Pause(root, Entry{Kind: "exec", Actor: "farroctl"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Pause(root, Entry{Kind: "a/b"}); !errors.Is(err, ErrKind) {
		t.Errorf("Pause a/b: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "a")); !os.IsNotExist(err) {
		t.Errorf("Pause a/b made something: %v", err)
	}
	ls, ign, err := List(root)
	if err != nil || len(ign) != 0 || len(ls) != 2 || ls[0].Kind != "exec" || ls[1].Kind != "noop" ||
		ls[1].Entry == nil || ls[1].Reason != "still" {
		t.Fatalf("List: %+v %v %v", ls, ign, err)
	}
	if was, err := Resume(root, "noop"); !was || err != nil {
		t.Fatalf("Resume: %v %v", was, err)
	}
	if was, err := Resume(root, "noop"); was || err != nil {
		t.Fatalf("Resume again: %v %v", was, err)
	}
	if ks, _, _ := Kinds(root); !slices.Equal(ks, []string{"exec"}) {
		t.Fatalf("Kinds after resume: %q", ks)
	}
}

// Hostile entries: listed without opening anything; only a regular file
// pauses its kind; reading one never blocks and never loads 1 GiB; a
// paused/ that is a symlink is refused.
func TestHostileEntries(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := Ensure(root); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for i, k := range fsqtest.HostileKinds {
		name := "k" + string(rune('a'+i))
		names[k] = name
		fsqtest.PlantHostile(t, Path(root, name), k)
	}
	if err := os.WriteFile(Path(root, "Bad"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var ls []Listed
	var ign []Ignored
	var err error
	go func() { defer close(done); ls, ign, err = List(root) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("List blocked on a hostile entry")
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].Kind != names[fsqtest.Sparse] || ls[0].Entry != nil || !strings.Contains(ls[0].Problem, "too large") {
		t.Errorf("paused: %+v, want only the sparse file, unreadable", ls)
	}
	if len(ign) != len(fsqtest.HostileKinds) { // the four others and "Bad"
		t.Errorf("ignored: %+v", ign)
	}
	if _, err := Read(root, names[fsqtest.FIFO]); !fsq.IsHostile(err) {
		t.Errorf("Read of a FIFO: %v", err)
	}
	// Resume removes a planted entry too, and a pause replaces one.
	if was, err := Resume(root, names[fsqtest.FIFO]); !was || err != nil {
		t.Errorf("Resume of a FIFO: %v %v", was, err)
	}
	if _, err := Pause(root, Entry{Kind: names[fsqtest.Symlink], Actor: "t"}); err != nil {
		t.Errorf("Pause over a symlink: %v", err)
	}
	if e, err := Read(root, names[fsqtest.Symlink]); err != nil || e.Actor != "t" {
		t.Errorf("after Pause over a symlink: %+v %v", e, err)
	}

	other := t.TempDir()
	if err := os.Symlink(DirPath(root), DirPath(other)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Kinds(other); err == nil {
		t.Errorf("Kinds followed a symlinked paused/")
	}
	if err := Ensure(other); err == nil {
		t.Errorf("Ensure accepted a symlinked paused/")
	}
}
