package fsq

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func newTestBarrier(t *testing.T) *Barrier {
	t.Helper()
	b, err := NewBarrier(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// A Wait that arrives while a sync runs must wait for the next sync: the
// running one may have started before the caller's changes.
func TestBarrierWaitsForASyncStartedAfterIt(t *testing.T) {
	t.Parallel()
	b := newTestBarrier(t)
	entered := make(chan int, 4)
	release := make(chan struct{}, 4)
	calls := 0
	b.syncfs = func(int) error {
		calls++
		entered <- calls
		<-release
		return nil
	}
	first := make(chan error, 1)
	go func() { first <- b.Wait() }()
	if n := <-entered; n != 1 {
		t.Fatalf("first sync is call %d", n)
	}
	second := make(chan error, 1)
	go func() { second <- b.Wait() }()
	// Give the second Wait a chance to (wrongly) piggyback on sync 1.
	time.Sleep(20 * time.Millisecond)
	release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-second:
		t.Fatalf("second Wait returned (%v) on a sync that began before it", err)
	case n := <-entered:
		if n != 2 {
			t.Fatalf("second sync is call %d", n)
		}
	}
	release <- struct{}{}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

// Waits that arrive while a sync runs all share the next one.
func TestBarrierSharesSyncs(t *testing.T) {
	t.Parallel()
	b := newTestBarrier(t)
	release := make(chan struct{})
	first := true
	b.syncfs = func(int) error {
		if first { // hold the first sync until everyone waits
			first = false
			<-release
		}
		return nil
	}
	const n = 32
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Wait(); err != nil {
				t.Error(err)
			}
		}()
	}
	for {
		b.mu.Lock()
		w := b.waiting
		b.mu.Unlock()
		if w == n-1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if s := b.Syncs(); s != 2 {
		t.Fatalf("%d waits made %d syncs; want 2 (the first, and one shared by the %d that came during it)", n, s, n-1)
	}
}

func TestBarrierReportsFailure(t *testing.T) {
	t.Parallel()
	b := newTestBarrier(t)
	boom := errors.New("EIO")
	b.syncfs = func(int) error { return boom }
	if err := b.Wait(); !errors.Is(err, boom) {
		t.Fatalf("Wait = %v, want %v", err, boom)
	}
	b.syncfs = func(int) error { return nil }
	if err := b.Wait(); err != nil {
		t.Fatalf("Wait after recovery = %v", err)
	}
}

func TestStageReplace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "job.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := Stage(path, []byte("new"))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("target changed before Replace: %q", b)
	}
	if target, ok := TempTarget(filepath.Base(st.tmp)); !ok || target != "job.json" {
		t.Fatalf("temp %s is not recognised as job.json's temp (%q, %v)", st.tmp, target, ok)
	}
	if err := st.Replace(); err != nil {
		t.Fatal(err)
	}
	st.Discard() // no-op after Replace
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("after Replace: %q", b)
	}
	if err := st.Replace(); err == nil {
		t.Fatal("second Replace succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
}

func TestStageDiscardAndVanishedDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := Stage(filepath.Join(dir, "job.json"), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	st.Discard()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("Discard left %v", ents)
	}
	if _, err := Stage(filepath.Join(dir, "gone", "job.json"), []byte("x")); !errors.Is(err, ErrVanished) {
		t.Fatalf("Stage in a missing dir = %v, want ErrVanished", err)
	}
	if err := RenameUnsynced(filepath.Join(dir, "nope"), filepath.Join(dir, "dst")); !errors.Is(err, ErrVanished) {
		t.Fatalf("RenameUnsynced of a missing source = %v, want ErrVanished", err)
	}
}
