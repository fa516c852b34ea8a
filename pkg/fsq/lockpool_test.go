package fsq_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/farro-dev/farro/pkg/fsq"
)

func ino(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// A pooled lock is a directory at its path holding the owner, refused to
// a second taker, and released into the pool, whose directory and owner
// file the next lock reuses (same inodes): nothing is allocated per lock.
// A shorter owner is padded and still parses.
func TestLockPoolRecycles(t *testing.T) {
	t.Parallel()
	root := setup(t)
	p := fsq.NewLockPool(filepath.Join(root, "pool"))
	a, b := filepath.Join(root, "a.lock"), filepath.Join(root, "b.lock")
	long := []byte(`{"pid":123456,"token":"aaaaaaaaaaaaaaaa","actor":"agentd/long-name"}` + "\n")
	if err := p.TryLock(a, long); err != nil {
		t.Fatal(err)
	}
	if got, err := fsq.ReadOwner(a); err != nil || string(got) != string(long) {
		t.Fatalf("owner = %q, %v; want %q", got, err, long)
	}
	if err := p.TryLock(a, long); !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("second TryLock = %v, want ErrLocked", err)
	}
	if err := fsq.TryLock(a, long); !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("plain TryLock on a pooled lock = %v, want ErrLocked", err)
	}
	dirIno, ownerIno := ino(t, a), ino(t, filepath.Join(a, fsq.OwnerFile))
	if err := p.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(a); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock still there after Unlock: %v", err)
	}
	short := []byte(`{"pid":7,"token":"bbbb"}` + "\n")
	if err := p.TryLock(b, short); err != nil {
		t.Fatal(err)
	}
	if ino(t, b) != dirIno || ino(t, filepath.Join(b, fsq.OwnerFile)) != ownerIno {
		t.Fatal("the second lock is a new directory or owner file: nothing was recycled")
	}
	got, err := fsq.ReadOwner(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(long) || !strings.HasPrefix(string(got), strings.TrimSuffix(string(short), "\n")) || got[len(got)-1] != '\n' {
		t.Fatalf("recycled owner = %q; want %q padded to %d bytes", got, short, len(long))
	}
	var o struct {
		PID   int    `json:"pid"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(got, &o); err != nil || o.PID != 7 || o.Token != "bbbb" {
		t.Fatalf("padded owner parses as %+v, %v", o, err)
	}
}

// Whatever came into the lock while it was held (a handler record, a
// recovery guard) does not travel to the next lock; a symlink planted in
// place of the lock is removed, its target left alone.
func TestLockPoolReleasesClean(t *testing.T) {
	t.Parallel()
	root := setup(t)
	p := fsq.NewLockPool(filepath.Join(root, "pool"))
	a, b := filepath.Join(root, "a.lock"), filepath.Join(root, "b.lock")
	if err := p.TryLock(a, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(a, "handler"), `{"pid":1}`)
	if err := p.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if err := p.TryLock(b, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != fsq.OwnerFile {
		t.Fatalf("recycled lock holds %v, want only the owner file", ents)
	}

	target := filepath.Join(root, "target")
	mustMkdir(t, target)
	mustWrite(t, filepath.Join(target, "keep"), "x")
	c := filepath.Join(root, "c.lock")
	if err := os.Symlink(target, c); err != nil {
		t.Fatal(err)
	}
	if err := p.Unlock(c); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(c); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("planted symlink still at the lock's path: %v", err)
	}
	if _, err := os.Stat(filepath.Join(target, "keep")); err != nil {
		t.Fatalf("the symlink's target was touched: %v", err)
	}
}

// Entries a killed predecessor left in the pool's directory are removed
// when the pool is first used.
func TestLockPoolClearsLeftovers(t *testing.T) {
	t.Parallel()
	root := setup(t)
	dir := filepath.Join(root, "pool")
	mustMkdir(t, dir)
	mustMkdir(t, filepath.Join(dir, "left"))
	mustWrite(t, filepath.Join(dir, "left", "guard"), "x")
	p := fsq.NewLockPool(dir)
	if err := p.TryLock(filepath.Join(root, "a.lock"), []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "left")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover entry kept: %v", err)
	}
}

// Many goroutines taking a few locks through one pool and a plain TryLock
// beside it: never two holders of one lock at a time.
func TestLockPoolExclusion(t *testing.T) {
	t.Parallel()
	root := setup(t)
	p := fsq.NewLockPool(filepath.Join(root, "pool"))
	var holders [3]atomic.Int32
	var taken atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				k := (g + i) % len(holders)
				path := filepath.Join(root, fmt.Sprintf("%d.lock", k))
				lock, unlock := p.TryLock, p.Unlock
				if g == 0 {
					lock, unlock = fsq.TryLock, fsq.Unlock
				}
				if err := lock(path, []byte(fmt.Sprintf("{\"g\":%d}\n", g))); err != nil {
					if !errors.Is(err, fsq.ErrLocked) {
						t.Error(err)
						return
					}
					continue
				}
				if n := holders[k].Add(1); n != 1 {
					t.Errorf("lock %d held %d times at once", k, n)
				}
				taken.Add(1)
				holders[k].Add(-1)
				if err := unlock(path); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if taken.Load() == 0 {
		t.Fatal("no lock was ever taken")
	}
}
