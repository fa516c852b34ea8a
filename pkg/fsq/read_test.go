package fsq_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/fsq/fsqtest"
)

// readPromptly runs ReadFileCapped in a goroutine so that a read that
// blocks (open(2) of a FIFO waits for a writer) fails the test instead of
// hanging it.
func readPromptly(t *testing.T, path string, max int64) ([]byte, error) {
	t.Helper()
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := fsq.ReadFileCapped(path, max)
		ch <- res{b, err}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(5 * time.Second):
		// Unblock the reader (a FIFO open waits for a writer) so the
		// goroutine does not leak past the test.
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		<-ch
		t.Fatalf("ReadFileCapped(%s) blocked for 5s", path)
		return nil, nil
	}
}

// hostileEntries makes, in dir, one of each entry a spool read must refuse
// and returns their paths with the error each must yield.
func hostileEntries(t *testing.T, dir string) map[string]error {
	t.Helper()
	want := map[string]error{
		fsqtest.FIFO: fsq.ErrNotRegular, fsqtest.Socket: fsq.ErrNotRegular, fsqtest.Directory: fsq.ErrNotRegular,
		fsqtest.Sparse: fsq.ErrTooLarge, fsqtest.Symlink: fsq.ErrSymlink,
	}
	out := map[string]error{}
	for _, kind := range fsqtest.HostileKinds {
		path := filepath.Join(dir, strings.ReplaceAll(kind, " ", "-"))
		fsqtest.PlantHostile(t, path, kind)
		out[path] = want[kind]
	}
	return out
}

func TestReadFileCappedRefusesHostileEntries(t *testing.T) {
	t.Parallel()
	for path, want := range hostileEntries(t, t.TempDir()) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := readPromptly(t, path, 64<<10)
			if !errors.Is(err, want) {
				t.Fatalf("ReadFileCapped = %d bytes, %v; want %v", len(b), err, want)
			}
			if !fsq.IsHostile(err) {
				t.Fatalf("IsHostile(%v) = false", err)
			}
			if b != nil {
				t.Fatalf("returned %d bytes with the error", len(b))
			}
		})
	}
}

func TestReadFileCapped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	mustWrite(t, p, "0123456789")
	for _, max := range []int64{10, 11, 1 << 20} {
		if got, err := fsq.ReadFileCapped(p, max); err != nil || string(got) != "0123456789" {
			t.Fatalf("cap %d: ReadFileCapped = %q, %v", max, got, err)
		}
	}
	if _, err := fsq.ReadFileCapped(p, 9); !errors.Is(err, fsq.ErrTooLarge) {
		t.Fatalf("cap 9 of 10 bytes = %v, want ErrTooLarge", err)
	}
	empty := filepath.Join(dir, "empty")
	mustWrite(t, empty, "")
	if got, err := fsq.ReadFileCapped(empty, 0); err != nil || len(got) != 0 {
		t.Fatalf("empty file = %q, %v", got, err)
	}
	_, err := fsq.ReadFileCapped(filepath.Join(dir, "none"), 10)
	if !errors.Is(err, fs.ErrNotExist) || fsq.IsHostile(err) {
		t.Fatalf("missing = %v, want ErrNotExist and not hostile", err)
	}
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		if _, err := fsq.ReadFileCapped(p, 10); !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("unreadable = %v, want ErrPermission", err)
		}
	}
}

func TestReadOwnerIsCapped(t *testing.T) {
	t.Parallel()
	lock := filepath.Join(t.TempDir(), "j.lock")
	mustMkdir(t, lock)
	mustWrite(t, filepath.Join(lock, fsq.OwnerFile), strings.Repeat("x", fsq.OwnerReadCap+1))
	if _, err := fsq.ReadOwner(lock); !errors.Is(err, fsq.ErrTooLarge) {
		t.Fatalf("ReadOwner of %d bytes = %v, want ErrTooLarge", fsq.OwnerReadCap+1, err)
	}
	if err := os.Remove(filepath.Join(lock, fsq.OwnerFile)); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(lock, fsq.OwnerFile), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := fsq.ReadOwner(lock); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, fsq.ErrNotRegular) {
			t.Fatalf("ReadOwner of a FIFO = %v, want ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		if w, err := os.OpenFile(filepath.Join(lock, fsq.OwnerFile), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("ReadOwner of a FIFO blocked")
	}
}
