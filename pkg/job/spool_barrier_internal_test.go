package job

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/farro-dev/farro/pkg/fsq"
)

// F14: a failed open of the barrier (EMFILE, say) is not remembered: the
// next transaction opens it again.
func TestBarrierOpenFailureIsRetried(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	opens := 0
	s.newBarrier = func(dir string, opts ...fsq.BarrierOption) (*fsq.Barrier, error) {
		opens++
		if opens == 1 {
			return nil, fmt.Errorf("barrier %s: %w", dir, syscall.EMFILE)
		}
		return fsq.NewBarrier(dir, opts...)
	}
	if err := s.Sync(); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("first Sync = %v, want EMFILE", err)
	}
	if err := s.Sync(); err != nil {
		t.Fatalf("Sync after the descriptors are back = %v", err)
	}
	if err := s.Sync(); err != nil || opens != 2 {
		t.Fatalf("third Sync = %v after %d opens; want nil after 2 (the open barrier is kept)", err, opens)
	}
	if n := s.Syncs(); n != 2 {
		t.Fatalf("Syncs = %d, want 2", n)
	}
}

// WithBarrierSync reaches the barrier, and a failed sync stays failed.
func TestWithBarrierSyncIsSticky(t *testing.T) {
	t.Parallel()
	calls := 0
	s, err := Open(filepath.Join(t.TempDir(), "spool"), WithBarrierSync(func(int) error {
		calls++
		return syscall.EIO
	}))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := s.Sync(); !errors.Is(err, fsq.ErrDurability) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("Sync %d = %v, want ErrDurability (EIO)", i, err)
		}
	}
	if calls != 1 {
		t.Fatalf("sync fn called %d times, want 1", calls)
	}
}
