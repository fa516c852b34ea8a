package fsq_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/farro-dev/farro/pkg/fsq"
)

// F10: a TryLock that stalls between its mkdir and its owner file can find
// its ownerless lock recovered (moved aside, as job.RecoverJudgedLock does)
// and taken by someone else. Its failure must not remove the other lock.
// Not parallel: the observer is global.
func TestTryLockNeverRemovesAnotherLock(t *testing.T) {
	for _, tc := range []struct {
		name string
		// otherOwner: whether the other party has written its owner file
		// by the time the stalled call resumes.
		otherOwner bool
	}{
		{"other lock with owner", true},
		{"other lock still ownerless", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lock := filepath.Join(dir, "j.lock")
			moved := filepath.Join(dir, "trash")
			fired := false
			fsq.SetObserver(func(op fsq.Op, path, _ string) {
				if op != fsq.OpCreate || path != filepath.Join(lock, fsq.OwnerFile) || fired {
					return
				}
				fired = true
				// The stall: recovery moves the ownerless lock aside and
				// another agent takes the lock anew.
				if err := os.Rename(lock, moved); err != nil {
					t.Error(err)
				}
				if err := os.Mkdir(lock, 0o755); err != nil {
					t.Error(err)
				}
				if tc.otherOwner {
					if err := os.WriteFile(filepath.Join(lock, fsq.OwnerFile), []byte("other\n"), 0o644); err != nil {
						t.Error(err)
					}
				}
			})
			defer fsq.SetObserver(nil)
			err := fsq.TryLock(lock, []byte("me\n"))
			fsq.SetObserver(nil)
			if !fired {
				t.Fatal("the observer never ran at OpCreate")
			}
			if !errors.Is(err, fsq.ErrLocked) {
				t.Fatalf("stalled TryLock = %v, want ErrLocked", err)
			}
			fi, lerr := os.Lstat(lock)
			if lerr != nil || !fi.IsDir() {
				t.Fatalf("the other party's lock was removed: %v", lerr)
			}
			owner, oerr := fsq.ReadOwner(lock)
			switch {
			case tc.otherOwner && (oerr != nil || string(owner) != "other\n"):
				t.Fatalf("the other lock's owner = %q, %v; want \"other\\n\"", owner, oerr)
			case !tc.otherOwner && !errors.Is(oerr, fs.ErrNotExist):
				t.Fatalf("the stalled call wrote %q into the other lock (%v)", owner, oerr)
			}
			// The other party can still complete its lock: its owner is the
			// only one there.
			if !tc.otherOwner {
				if err := os.WriteFile(filepath.Join(lock, fsq.OwnerFile), []byte("other\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// The stalled call cleaned up after itself in the directory it
			// made (now moved aside), and only there.
			if _, err := os.Lstat(filepath.Join(moved, fsq.OwnerFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("stalled call's owner file left in its moved lock: %v", err)
			}
		})
	}
}

// A lock removed (not replaced) during the stall: TryLock reports it lost,
// and creates nothing.
func TestTryLockLostWhileOwnerless(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "j.lock")
	fsq.SetObserver(func(op fsq.Op, path, _ string) {
		if op == fsq.OpCreate && path == filepath.Join(lock, fsq.OwnerFile) {
			if err := os.Remove(lock); err != nil {
				t.Error(err)
			}
		}
	})
	defer fsq.SetObserver(nil)
	err := fsq.TryLock(lock, []byte("me\n"))
	fsq.SetObserver(nil)
	if !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("TryLock = %v, want ErrLocked", err)
	}
	if _, err := os.Lstat(lock); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lock recreated: %v", err)
	}
}
