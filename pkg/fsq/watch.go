package fsq

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Event is one change seen in a watched directory: a name that appeared
// (Created) or disappeared (Removed). Rescan events carry no name and ask
// the consumer to re-list everything, because notifications can be lost.
type Event struct {
	Dir     string
	Name    string
	Created bool
	Removed bool
	Rescan  bool
}

// WatchConfig configures Watch.
type WatchConfig struct {
	// Dirs are watched (not recursively).
	Dirs []string
	// Rescan is the period of full rescans (default 10s). fsnotify drops
	// events when its queue overflows and never fires on network
	// filesystems; the periodic rescan is what guarantees pick-up.
	Rescan time.Duration
	// NoNotify disables fsnotify: only periodic rescans are delivered.
	NoNotify bool
	// OnFallback, if set, makes a failure to set up fsnotify (too many
	// watches, an unsupported filesystem) non-fatal: it is called with the
	// error and Watch goes on with periodic rescans only.
	OnFallback func(error)
}

// Watch sends events for cfg.Dirs to out until ctx is done. The first
// event is always a Rescan. Overflows of the kernel queue become a Rescan.
// Dot files (temp files) are filtered out.
func Watch(ctx context.Context, cfg WatchConfig, out chan<- Event) error {
	if cfg.Rescan <= 0 {
		cfg.Rescan = 10 * time.Second
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if !cfg.NoNotify {
		w, err := notifier(cfg.Dirs)
		switch {
		case err == nil:
			defer w.Close()
			events, errs = w.Events, w.Errors
		case cfg.OnFallback != nil:
			cfg.OnFallback(err)
		default:
			return err
		}
	}
	send := func(ev Event) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !send(Event{Rescan: true}) {
		return nil
	}
	tick := time.NewTicker(cfg.Rescan)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if !send(Event{Rescan: true}) {
				return nil
			}
		case err := <-errs:
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				if !send(Event{Rescan: true}) {
					return nil
				}
			}
		case e := <-events:
			if drop, overflow := injectedOverflow(); drop {
				// Test builds only (see crashpoint_on.go): the event is
				// lost to a simulated queue overflow.
				if overflow && !send(Event{Rescan: true}) {
					return nil
				}
				continue
			}
			name := filepath.Base(e.Name)
			if strings.HasPrefix(name, ".") {
				continue
			}
			ev := Event{Dir: filepath.Dir(e.Name), Name: name}
			switch {
			case e.Has(fsnotify.Create):
				ev.Created = true
			case e.Has(fsnotify.Remove), e.Has(fsnotify.Rename):
				ev.Removed = true
			default:
				continue
			}
			if !send(ev) {
				return nil
			}
		}
	}
}

func notifier(dirs []string) (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return nil, fmt.Errorf("fsnotify: %w", err)
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			w.Close()
			return nil, fmt.Errorf("fsnotify %s: %w", d, err)
		}
	}
	return w, nil
}

// Watcher is a Watch running in the background.
type Watcher struct {
	// Events delivers the events of Watch.
	Events <-chan Event
	stop   context.CancelFunc
	done   chan error
}

// StartWatch runs Watch in a goroutine until Stop or ctx is done. Unless
// cfg.OnFallback is set, a failure of fsnotify ends the stream; Err
// reports it.
func StartWatch(ctx context.Context, cfg WatchConfig) *Watcher {
	ctx, stop := context.WithCancel(ctx)
	ch := make(chan Event, 1024)
	w := &Watcher{Events: ch, stop: stop, done: make(chan error, 1)}
	go func() { w.done <- Watch(ctx, cfg, ch) }()
	return w
}

// Stop ends the watch and waits for its goroutine; it returns the error
// that ended the watch early, if any.
func (w *Watcher) Stop() error {
	w.stop()
	err := <-w.done
	w.done <- err // Stop may be called again
	return err
}
