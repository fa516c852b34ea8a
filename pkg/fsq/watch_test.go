package fsq_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// startWatch runs Watch in a goroutine and returns its events; the test's
// cleanup cancels it and waits for it to return.
func startWatch(t *testing.T, cfg fsq.WatchConfig) <-chan fsq.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan fsq.Event)
	done := make(chan error, 1)
	go func() { done <- fsq.Watch(ctx, cfg, out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Watch returned %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Watch did not return after cancel")
		}
	})
	return out
}

func next(t *testing.T, ch <-chan fsq.Event) fsq.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return fsq.Event{}
}

func TestWatchNotify(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	// A long rescan period: every event after the first comes from fsnotify.
	ch := startWatch(t, fsq.WatchConfig{Dirs: []string{dir}, Rescan: time.Hour})
	if ev := next(t, ch); !ev.Rescan {
		t.Fatalf("first event = %+v, want Rescan", ev)
	}

	// A dot file (a temp file of an atomic write) is filtered out; the
	// job directory created after it is the next event.
	mustWrite(t, filepath.Join(dir, ".tmp123"), "x")
	mustMkdir(t, filepath.Join(dir, "job1"))
	ev := next(t, ch)
	if !ev.Created || ev.Name != "job1" || ev.Dir != dir || ev.Rescan || ev.Removed {
		t.Fatalf("event = %+v, want Created job1 in %s", ev, dir)
	}

	if err := os.Rename(filepath.Join(dir, "job1"), filepath.Join(t.TempDir(), "job1")); err != nil {
		t.Fatal(err)
	}
	ev = next(t, ch)
	if !ev.Removed || ev.Name != "job1" || ev.Created {
		t.Fatalf("event = %+v, want Removed job1", ev)
	}
}

func TestWatchNoNotifyRescans(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	ch := startWatch(t, fsq.WatchConfig{Dirs: []string{dir}, Rescan: 10 * time.Millisecond, NoNotify: true})
	if ev := next(t, ch); !ev.Rescan {
		t.Fatalf("first event = %+v, want Rescan", ev)
	}
	mustMkdir(t, filepath.Join(dir, "job1"))
	for i := 0; i < 3; i++ {
		if ev := next(t, ch); !ev.Rescan || ev.Name != "" {
			t.Fatalf("event %d = %+v, want only periodic Rescans without fsnotify", i, ev)
		}
	}
}

func TestWatchMissingDir(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	out := make(chan fsq.Event, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fsq.Watch(ctx, fsq.WatchConfig{Dirs: []string{filepath.Join(dir, "none")}}, out); err == nil {
		t.Fatal("Watch of a missing directory returned nil")
	}
}

func TestWatchStopsWhenConsumerGone(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan fsq.Event) // nobody reads: Watch blocks on the first send
	done := make(chan error, 1)
	go func() { done <- fsq.Watch(ctx, fsq.WatchConfig{Dirs: []string{dir}}, out) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Watch = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch blocked on a send after cancel")
	}
}

// TestWatchCoalesces: with Coalesce set, the names that appear while the
// reader waits come together, no sooner than Coalesce after the first.
func TestWatchCoalesces(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	const coalesce = 300 * time.Millisecond
	ch := startWatch(t, fsq.WatchConfig{Dirs: []string{dir}, Rescan: time.Hour, Coalesce: coalesce})
	if ev := next(t, ch); !ev.Rescan {
		t.Fatalf("first event = %+v, want Rescan", ev)
	}
	mustMkdir(t, filepath.Join(dir, "a"))
	if ev := next(t, ch); ev.Name != "a" || !ev.Created {
		t.Fatalf("event = %+v, want Created a", ev)
	}
	first := time.Now()
	for _, name := range []string{"b", "c", "d"} {
		mustMkdir(t, filepath.Join(dir, name))
	}
	for _, want := range []string{"b", "c", "d"} {
		if ev := next(t, ch); ev.Name != want || !ev.Created {
			t.Fatalf("event = %+v, want Created %s", ev, want)
		}
	}
	// The reader slept for coalesce after the read that carried a, so b
	// cannot have been read earlier (a lower bound: a slow machine only
	// makes it later).
	if got := time.Since(first); got < coalesce-50*time.Millisecond {
		t.Fatalf("b, c, d arrived %v after a; want no sooner than about %v", got, coalesce)
	}
}

// TestWatchDirGoneAsksRescan: a watched directory that is moved away is
// not silently forgotten: the consumer is asked to list again.
func TestWatchDirGoneAsksRescan(t *testing.T) {
	t.Parallel()
	root := setup(t)
	dir := filepath.Join(root, "watched")
	mustMkdir(t, dir)
	ch := startWatch(t, fsq.WatchConfig{Dirs: []string{dir}, Rescan: time.Hour})
	if ev := next(t, ch); !ev.Rescan {
		t.Fatalf("first event = %+v, want Rescan", ev)
	}
	if err := os.Rename(dir, filepath.Join(root, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, ch); !ev.Rescan {
		t.Fatalf("event = %+v, want Rescan after the watched directory moved", ev)
	}
}
