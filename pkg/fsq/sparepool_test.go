package fsq_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/farro-dev/farro/pkg/fsq"
)

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A rewrite through the pool swaps a spare in: the target holds exactly
// the new content (shorter than the spare's old one included), and its
// old inode becomes a spare that is written again only once a sync that
// began after the swap has completed.
func TestSparePoolSwapsAndCools(t *testing.T) {
	t.Parallel()
	root := setup(t)
	var started, completed atomic.Uint64
	p := fsq.NewSparePool(filepath.Join(root, "spares"), func() (uint64, uint64) { return started.Load(), completed.Load() })
	target := filepath.Join(root, "job.json")
	mustWrite(t, target, `{"status":"queued","padding":"xxxxxxxxxxxxxxxxxxxxxxxx"}`)
	oldIno := ino(t, target)

	st, err := p.Stage(target, []byte(`{"status":"in-progress"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Replace(); err != nil {
		t.Fatal(err)
	}
	st.Discard()
	first := ino(t, target)
	if got := readString(t, target); got != `{"status":"in-progress"}` {
		t.Fatalf("target = %q", got)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o644 {
		t.Fatalf("target mode %v, want 0644", fi.Mode().Perm())
	}

	// No sync since the swap: the old inode must not be written again.
	st, err = p.Stage(target, []byte(`{"status":"succeeded"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Replace(); err != nil {
		t.Fatal(err)
	}
	if ino(t, target) == oldIno {
		t.Fatal("a spare was reused before the swap that freed it was durable")
	}

	// A sync begins after both swaps and completes: the old inode is
	// reused, rewritten to exactly the new content.
	started.Add(1)
	completed.Add(1)
	st, err = p.Stage(target, []byte(`{"status":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Replace(); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, target); got != `{"status":"x"}` {
		t.Fatalf("target after reuse = %q", got)
	}
	// The target is now one of the two inodes the first two swaps freed.
	if n := ino(t, target); n != oldIno && n != first {
		t.Fatalf("target inode %d after a sync: a new file, not a cooled spare (%d, %d)", n, oldIno, first)
	}
}

// A spare staged but not put in place (the fence refused, say) is given
// back and reused at once; the target is untouched.
func TestSparePoolDiscardGivesBack(t *testing.T) {
	t.Parallel()
	root := setup(t)
	p := fsq.NewSparePool(filepath.Join(root, "spares"), func() (uint64, uint64) { return 0, 0 })
	target := filepath.Join(root, "job.json")
	mustWrite(t, target, "old")
	st, err := p.Stage(target, []byte("new"))
	if err != nil {
		t.Fatal(err)
	}
	st.Discard()
	if got := readString(t, target); got != "old" {
		t.Fatalf("target = %q after a discarded stage", got)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "spares"))
	if len(ents) != 1 {
		t.Fatalf("pool holds %d files, want the one spare", len(ents))
	}
	spare := ino(t, filepath.Join(root, "spares", ents[0].Name()))
	st, err = p.Stage(target, []byte("newer"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Replace(); err != nil {
		t.Fatal(err)
	}
	if ino(t, target) != spare || readString(t, target) != "newer" {
		t.Fatal("the discarded spare was not the one reused")
	}
}

// With nothing to swap with, Replace still puts the content in place.
func TestSparePoolNoTarget(t *testing.T) {
	t.Parallel()
	root := setup(t)
	p := fsq.NewSparePool(filepath.Join(root, "spares"), nil)
	target := filepath.Join(root, "job.json")
	st, err := p.Stage(target, []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Replace(); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, target); got != "first" {
		t.Fatalf("target = %q", got)
	}
}
