package fsq

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A failed fsync is never forgotten: the write that met it fails with
// ErrDurability, and so does every later durable step of the process,
// even once fsync works again (the kernel may have dropped the pages it
// could not write). Not parallel: the state is the process's.
func TestFailedFsyncIsSticky(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "before"), []byte("ok")); err != nil {
		t.Fatal(err)
	}
	real := syncFile
	t.Cleanup(func() {
		syncFile = real
		durability.mu.Lock()
		durability.err = nil
		durability.mu.Unlock()
	})
	syncFile = func(*os.File) error { return syscall.EIO }
	if err := CreateFile(filepath.Join(dir, "a"), []byte("x")); !errors.Is(err, ErrDurability) {
		t.Fatalf("create with a failing fsync = %v, want ErrDurability", err)
	}
	syncFile = real // fsync works again
	for name, step := range map[string]func() error{
		"WriteFile":  func() error { return WriteFile(filepath.Join(dir, "b"), []byte("x")) },
		"CreateFile": func() error { return CreateFile(filepath.Join(dir, "c"), []byte("x")) },
		"SyncDir":    func() error { return SyncDir(dir) },
		"AppendLine": func() error { return AppendLine(filepath.Join(dir, "before"), []byte("x")) },
		"Barrier": func() error {
			b, err := NewBarrier(dir)
			if err != nil {
				return err
			}
			defer b.Close()
			return b.Wait()
		},
	} {
		if err := step(); !errors.Is(err, ErrDurability) {
			t.Errorf("%s after a failed fsync = %v, want ErrDurability", name, err)
		}
	}
	if err := DurabilityErr(); !errors.Is(err, ErrDurability) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("DurabilityErr = %v, want ErrDurability wrapping EIO", err)
	}
}
