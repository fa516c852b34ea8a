package fsq

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
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
	// Rescan is the period of full rescans (default 10s). inotify drops
	// events when its queue overflows and never fires on network
	// filesystems; the periodic rescan is what guarantees pick-up.
	Rescan time.Duration
	// NoNotify disables inotify: only periodic rescans are delivered.
	NoNotify bool
	// OnFallback, if set, makes a failure to set up inotify (too many
	// watches, an unsupported filesystem) non-fatal: it is called with the
	// error and Watch goes on with periodic rescans only.
	OnFallback func(error)
	// Coalesce, when positive, is the least time between two reads of the
	// kernel's queue: whatever arrived meanwhile is delivered together,
	// so a busy spool wakes the consumer at most 1/Coalesce times a
	// second instead of once per event. For daemons that react to
	// events without hurry (watchdogd, managerd); an agent, whose pickup
	// latency is an event's, leaves it 0.
	Coalesce time.Duration
}

// The inotify events Watch asks for: names that appear or disappear in a
// watched directory, and the directory itself going away. Writes inside
// it and attribute changes are not asked for: nobody uses them, and each
// one would wake the reader.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_DELETE | unix.IN_MOVED_FROM |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// Watch sends events for cfg.Dirs to out until ctx is done. The first
// event is always a Rescan. Overflows of the kernel queue become a Rescan,
// and so does a watched directory that is removed or moved (the consumer
// finds out by listing). Dot files (temp files) are filtered out.
//
// The kernel's queue is read by one goroutine, a whole buffer at a time,
// and every event of a read is sent before the next read: under load one
// wake-up of the consumer carries many events.
func Watch(ctx context.Context, cfg WatchConfig, out chan<- Event) error {
	if cfg.Rescan <= 0 {
		cfg.Rescan = 10 * time.Second
	}
	var batches <-chan []Event
	if !cfg.NoNotify {
		n, err := newNotifier(cfg.Dirs)
		switch {
		case err == nil:
			ch := make(chan []Event, 1)
			go n.read(ctx, cfg.Coalesce, ch)
			defer n.close()
			batches = ch
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
		case batch, ok := <-batches:
			if !ok {
				// The reader stopped on an error: rescans only from now.
				batches = nil
				if !send(Event{Rescan: true}) {
					return nil
				}
				continue
			}
			for _, ev := range batch {
				if !ev.Rescan {
					if drop, overflow := injectedOverflow(); drop {
						if overflow && !send(Event{Rescan: true}) {
							return nil
						}
						continue
					}
				}
				if !send(ev) {
					return nil
				}
			}
		}
	}
}

// notifier is an inotify instance watching a few directories.
type notifier struct {
	f    *os.File // non-blocking: reads wait in Go's poller, Close ends them
	dirs map[int32]string
}

func newNotifier(dirs []string) (*notifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	n := &notifier{f: os.NewFile(uintptr(fd), "inotify"), dirs: make(map[int32]string, len(dirs))}
	for _, d := range dirs {
		wd, err := unix.InotifyAddWatch(fd, d, watchMask)
		if err != nil {
			n.f.Close()
			return nil, fmt.Errorf("inotify %s: %w", d, err)
		}
		n.dirs[int32(wd)] = filepath.Clean(d)
	}
	return n, nil
}

func (n *notifier) close() { n.f.Close() }

// read sends the events of each read of the queue as one batch, until ctx
// is done or the queue cannot be read (the channel is then closed).
func (n *notifier) read(ctx context.Context, coalesce time.Duration, out chan<- []Event) {
	defer close(out)
	buf := make([]byte, 64<<10)
	for {
		k, err := n.f.Read(buf)
		if err != nil {
			return // closed by Watch, or broken: Watch falls back to rescans
		}
		batch := n.parse(buf[:k])
		if len(batch) > 0 {
			select {
			case out <- batch:
			case <-ctx.Done():
				return
			}
		}
		if coalesce > 0 {
			select {
			case <-time.After(coalesce):
			case <-ctx.Done():
				return
			}
		}
	}
}

// parse decodes the inotify events in b (struct inotify_event: wd, mask,
// cookie, len, then len bytes of NUL-padded name).
func (n *notifier) parse(b []byte) []Event {
	var batch []Event
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:4]))
		mask := binary.NativeEndian.Uint32(b[4:8])
		nameLen := int(binary.NativeEndian.Uint32(b[12:16]))
		end := unix.SizeofInotifyEvent + nameLen
		if end > len(b) {
			break
		}
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:end]), "\x00")
		b = b[end:]
		ev, ok := n.event(wd, mask, name)
		if ok {
			batch = append(batch, ev)
		}
	}
	return batch
}

func (n *notifier) event(wd int32, mask uint32, name string) (Event, bool) {
	switch {
	case mask&unix.IN_Q_OVERFLOW != 0:
		return Event{Rescan: true}, true
	case mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
		return Event{Rescan: true}, true
	case mask&unix.IN_IGNORED != 0, name == "", strings.HasPrefix(name, "."):
		return Event{}, false
	}
	dir, ok := n.dirs[wd]
	if !ok {
		return Event{}, false
	}
	ev := Event{Dir: dir, Name: name}
	switch {
	case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		ev.Created = true
	case mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
		ev.Removed = true
	default:
		return Event{}, false
	}
	return ev, true
}

// Watcher is a Watch running in the background.
type Watcher struct {
	// Events delivers the events of Watch.
	Events <-chan Event
	stop   context.CancelFunc
	done   chan error
}

// StartWatch runs Watch in a goroutine until Stop or ctx is done. Unless
// cfg.OnFallback is set, a failure of inotify ends the stream; Err
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
