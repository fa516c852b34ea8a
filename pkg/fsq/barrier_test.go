package fsq

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
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
	b.injected = true
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
	b.injected = true
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
	b.injected = true
	b.syncfs = func(int) error { return boom }
	if err := b.Wait(); !errors.Is(err, boom) || !errors.Is(err, ErrDurability) {
		t.Fatalf("Wait = %v, want %v wrapped in ErrDurability", err, boom)
	}
	// Sticky: a sync that would succeed now proves nothing about what the
	// failed one lost, so it is not even tried.
	b.injected = true
	b.syncfs = func(int) error { return nil }
	for i := 0; i < 3; i++ {
		if err := b.Wait(); !errors.Is(err, ErrDurability) {
			t.Fatalf("Wait %d after a failed sync = %v, want ErrDurability", i, err)
		}
	}
	if s := b.Syncs(); s != 1 {
		t.Fatalf("syncs = %d after a failure, want 1 (none retried)", s)
	}
}

// A waiter that arrives while a failing sync runs must not be told its
// data is durable by the next sync (F8): its data was being written back by
// the sync that failed.
func TestBarrierFailureIsStickyForConcurrentWaiter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inSync := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int32
	b, err := NewBarrier(dir, WithSyncFunc(func(int) error {
		if calls.Add(1) == 1 {
			close(inSync)
			<-release
			return errors.New("EIO")
		}
		return nil // a later sync "succeeds": the kernel already dropped the error
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	errs := make(chan error, 2)
	go func() { errs <- b.Wait() }() // W1 starts sync 1, which fails
	<-inSync
	go func() { errs <- b.Wait() }() // W2 arrives during sync 1
	// W2 must be parked on the barrier before sync 1 ends.
	for {
		b.mu.Lock()
		w := b.waiting
		b.mu.Unlock()
		if w == 1 {
			break
		}
		runtime.Gosched()
	}
	close(release)
	for i := 0; i < 2; i++ {
		if err := <-errs; !errors.Is(err, ErrDurability) {
			t.Fatalf("waiter %d: Wait = %v, want ErrDurability", i, err)
		}
	}
	for i := 0; i < 3; i++ {
		if err := b.Wait(); !errors.Is(err, ErrDurability) {
			t.Fatalf("later Wait %d = %v, want ErrDurability", i, err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("sync fn called %d times, want 1 (never retried after a failure)", n)
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
