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
