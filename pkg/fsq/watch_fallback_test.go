package fsq_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// When fsnotify cannot be set up, OnFallback hears why and the watch goes
// on with periodic rescans, which is what guarantees pick-up.
func TestWatchFallsBackToRescans(t *testing.T) {
	t.Parallel()
	var fellBack atomic.Bool
	w := fsq.StartWatch(context.Background(), fsq.WatchConfig{
		Dirs:       []string{filepath.Join(t.TempDir(), "missing")},
		Rescan:     10 * time.Millisecond,
		OnFallback: func(error) { fellBack.Store(true) },
	})
	rescans := 0
	deadline := time.After(5 * time.Second)
	for rescans < 3 {
		select {
		case ev := <-w.Events:
			if ev.Rescan {
				rescans++
			}
		case <-deadline:
			t.Fatalf("only %d rescans after falling back", rescans)
		}
	}
	if err := w.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if !fellBack.Load() {
		t.Error("OnFallback was not called for an unwatchable directory")
	}
}

// Without OnFallback the failure ends the watch and Stop reports it.
func TestWatchWithoutFallbackReportsError(t *testing.T) {
	t.Parallel()
	w := fsq.StartWatch(context.Background(), fsq.WatchConfig{Dirs: []string{filepath.Join(t.TempDir(), "missing")}})
	if err := w.Stop(); err == nil {
		t.Error("Stop returned nil for a watch that could not start")
	}
}
