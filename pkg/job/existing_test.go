package job_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/farro-dev/farro/pkg/job"
)

// Open with Existing refuses what is not a spool and creates nothing
// there; it makes a spool of an empty directory and opens a spool as is.
func TestOpenExisting(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mk := func(rel string, files ...string) string {
		t.Helper()
		dir := filepath.Join(root, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	refused := []struct{ name, dir string }{
		{"missing (a typo)", filepath.Join(root, "spoool")},
		{"a directory of other things", mk("home", "notes.txt")},
		{"a file", filepath.Join(mk("f", "file"), "file")},
	}
	for _, c := range refused {
		before, _ := os.ReadDir(filepath.Dir(c.dir))
		_, err := job.Open(c.dir, job.Existing())
		if !errors.Is(err, job.ErrNotSpool) {
			t.Errorf("%s: Open = %v, want ErrNotSpool", c.name, err)
		}
		after, _ := os.ReadDir(filepath.Dir(c.dir))
		if len(after) != len(before) {
			t.Errorf("%s: Open created something beside it", c.name)
		}
		if _, err := os.Stat(filepath.Join(c.dir, "incoming")); err == nil {
			t.Errorf("%s: Open made incoming/ in a refused directory", c.name)
		}
	}
	for _, dir := range []string{mk("empty"), mk("checkout", "README.md", ".gitignore")} {
		s, err := job.Open(dir, job.Existing())
		if err != nil {
			t.Fatalf("Open(%s) = %v, want a new spool in an empty directory", dir, err)
		}
		if ok, err := job.IsSpool(s.Root); !ok || err != nil {
			t.Fatalf("IsSpool(%s) = %v, %v after Open", dir, ok, err)
		}
		// Now a spool, it opens again with something in it.
		if _, err := job.Open(dir, job.Existing()); err != nil {
			t.Fatalf("reopen %s: %v", dir, err)
		}
	}
}

// A directory that holds only the layout's own directories is a spool
// being laid out (a daemon starting beside another, an init cut short):
// Open with Existing finishes it. Daemons started together on an empty
// directory all open it.
func TestOpenExistingPartialLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, d := range []string{"agents", "tmp", "corrupt", "completed/succeeded"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := job.Open(dir, job.Existing()); err != nil {
		t.Fatalf("Open of a half-laid-out spool = %v, want it finished", err)
	}
	if ok, err := job.IsSpool(dir); !ok || err != nil {
		t.Fatalf("IsSpool = %v, %v after Open", ok, err)
	}
	// A file under a layout name is not part of a layout.
	odd := t.TempDir()
	if err := os.WriteFile(filepath.Join(odd, "tmp"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := job.Open(odd, job.Existing()); !errors.Is(err, job.ErrNotSpool) {
		t.Fatalf("Open of a directory with a file named tmp = %v, want ErrNotSpool", err)
	}

	for round := 0; round < 20; round++ {
		root := t.TempDir()
		errc := make(chan error, 4)
		for i := 0; i < cap(errc); i++ {
			go func() {
				_, err := job.Open(root, job.Existing())
				errc <- err
			}()
		}
		for i := 0; i < cap(errc); i++ {
			if err := <-errc; err != nil {
				t.Fatalf("round %d: concurrent Open of an empty directory: %v", round, err)
			}
		}
	}
}
