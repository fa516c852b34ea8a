package fsq_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// ScanDirFunc sees every name but dot files, across many reads of the
// directory, and tells directories from the rest without following
// symlinks.
func TestScanDirFunc(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want := map[string]bool{}
	for i := 0; i < 3000; i++ { // more than one getdents64 buffer
		name := fmt.Sprintf("job-%04d-%s", i, strings.Repeat("x", 60))
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		want[name] = true
	}
	for _, name := range []string{"file", "fifo", "link"} {
		want[name] = false
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "job-0000-"+strings.Repeat("x", 60)), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, ".hidden"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	if err := fsq.ScanDirFunc(dir, func(name string, isDir bool) error {
		if _, dup := got[name]; dup {
			t.Errorf("%s listed twice", name)
		}
		got[name] = isDir
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d names, want %d", len(got), len(want))
	}
	for name, isDir := range want {
		if g, ok := got[name]; !ok || g != isDir {
			t.Errorf("%s: listed %v, dir %v; want dir %v", name, ok, g, isDir)
		}
	}
	// fn's error stops the scan.
	stop := errors.New("stop")
	n := 0
	if err := fsq.ScanDirFunc(dir, func(string, bool) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("scan stopped by fn: %v after %d names", err, n)
	}
}

// A missing directory lists nothing; a FIFO, a symlink or a file in its
// place is an error at once, never waited on or followed.
func TestScanDirFuncHostileDir(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	none := func(string, bool) error { t.Error("a name was listed"); return nil }
	if err := fsq.ScanDirFunc(filepath.Join(base, "missing"), none); err != nil {
		t.Fatalf("missing dir: %v", err)
	}
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(base, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fifo", "link", "file"} {
		done := make(chan error, 1)
		go func() { done <- fsq.ScanDirFunc(filepath.Join(base, name), none) }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s in place of a directory: no error", name)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s in place of a directory: the scan blocked", name)
		}
	}
}
