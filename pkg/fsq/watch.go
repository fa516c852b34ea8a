package fsq

import (
	"context"
	"errors"
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
		w, err := fsnotify.NewBufferedWatcher(4096)
		if err != nil {
			return err
		}
		defer w.Close()
		for _, d := range cfg.Dirs {
			if err := w.Add(d); err != nil {
				return err
			}
		}
		events, errs = w.Events, w.Errors
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
