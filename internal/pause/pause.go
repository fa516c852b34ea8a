// Package pause is the queue-wide pause of a job kind: a file
// paused/<kind> in the spool's root, written durably by farroctl pause
// and removed by farroctl resume. Every agentd lists paused/ (on an
// inotify event, and at least every 500 ms) and claims no job of a paused
// kind: its queued jobs stay queued, running ones finish.
//
// An agent reads only the names and types of the entries, never their
// content: a regular file whose name is a valid kind pauses that kind;
// anything else (a symlink, a FIFO, a directory, a dot or temp file, a
// name that is no kind) pauses nothing, so an entry planted there cannot
// block or exhaust an agent. The content (who paused, when, why) is for
// farroctl, which reads it capped and without blocking.
package pause

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// Dir is the spool's directory of pause files.
const Dir = "paused"

// MaxFileSize caps the read of a pause file (a few short fields).
const MaxFileSize = 4 << 10

// MaxReasonLen bounds an operator's reason.
const MaxReasonLen = 1000

var errNotPauseFile = errors.New("not a pause file")

// ErrKind reports a name that cannot be a job kind (job.KindPattern).
var ErrKind = errors.New("invalid kind")

// Entry is the content of paused/<kind>.
type Entry struct {
	Kind     string    `json:"kind"`
	PausedAt time.Time `json:"paused_at"`
	Actor    string    `json:"paused_by"`      // farroctl
	User     string    `json:"user,omitempty"` // the operator's login, when known
	Host     string    `json:"host,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Reason   string    `json:"reason,omitempty"`
}

// ValidateKind checks that kind can name a pause file: a job kind
// (job.KindPattern), hence no path separator, no dot first, no "..".
func ValidateKind(kind string) error {
	if !job.ValidKind(kind) {
		return fmt.Errorf("%w %q: must match %s", ErrKind, kind, job.KindPattern)
	}
	return nil
}

// DirPath is root's paused/.
func DirPath(root string) string { return filepath.Join(root, Dir) }

// Path is root's paused/<kind>.
func Path(root, kind string) string { return filepath.Join(root, Dir, kind) }

// Ensure makes root's paused/ (durably) and refuses one that is not a
// real directory (a symlink, a file).
func Ensure(root string) error {
	dir := DirPath(root)
	if err := fsq.MkdirDurable(dir); err != nil {
		return err
	}
	if ok, err := fsq.IsRealDir(dir); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("%s is not a directory", dir)
		}
		return err
	}
	return nil
}

// Pause writes paused/<e.Kind> durably (temp file, fsync, rename, fsync
// of paused/), replacing an earlier pause of the kind. It returns the
// earlier entry, if there was a readable one.
func Pause(root string, e Entry) (prev *Entry, err error) {
	if err := ValidateKind(e.Kind); err != nil {
		return nil, err
	}
	if len(e.Reason) > MaxReasonLen {
		return nil, fmt.Errorf("reason too long: %d bytes, at most %d", len(e.Reason), MaxReasonLen)
	}
	if err := Ensure(root); err != nil {
		return nil, err
	}
	if p, err := Read(root, e.Kind); err == nil {
		prev = p
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	// The rename replaces whatever has the name, a planted FIFO or
	// symlink included (a directory makes it fail: reported).
	if err := fsq.WriteFile(Path(root, e.Kind), append(b, '\n')); err != nil {
		return nil, err
	}
	return prev, nil
}

// Resume removes paused/<kind> (whatever it is, a directory aside) and
// fsyncs paused/. It reports whether the kind was paused.
func Resume(root, kind string) (bool, error) {
	if err := ValidateKind(kind); err != nil {
		return false, err
	}
	err := os.Remove(Path(root, kind))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, fsq.SyncDir(DirPath(root))
}

// Read reads paused/<kind>: capped, without following a symlink nor
// blocking on a FIFO. A missing file matches fs.ErrNotExist.
func Read(root, kind string) (*Entry, error) {
	if err := ValidateKind(kind); err != nil {
		return nil, err
	}
	b, err := fsq.ReadFileCapped(Path(root, kind), MaxFileSize)
	if err != nil {
		return nil, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", Path(root, kind), errNotPauseFile, err)
	}
	e.Kind = kind // the name decides, as for the agents
	return &e, nil
}

// Kinds lists the paused kinds: the regular files of paused/ named by a
// valid kind, from the directory's entries alone (no file is opened). A
// missing paused/ pauses nothing. Other entries are returned as ignored
// (name, and why), for farroctl to report.
func Kinds(root string) (kinds []string, ignored map[string]string, err error) {
	dir := DirPath(root)
	// O_NOFOLLOW|O_DIRECTORY: a paused/ that is a symlink (or a FIFO) is
	// refused, never followed nor waited on.
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil, nil
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, nil, fmt.Errorf("%s: not a directory (%w): no kind is paused until it is one", dir, err)
		}
		return nil, nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	for {
		des, rerr := f.ReadDir(256)
		for _, de := range des {
			name := de.Name()
			if strings.HasPrefix(name, ".") {
				continue // temp files of a pause being written
			}
			switch {
			case ValidateKind(name) != nil:
				ignored = addIgnored(ignored, name, "not a valid kind name")
			case !de.Type().IsRegular():
				ignored = addIgnored(ignored, name, "not a regular file ("+typeName(de.Type())+")")
			default:
				kinds = append(kinds, name)
			}
		}
		if rerr != nil || len(des) == 0 {
			break
		}
	}
	sort.Strings(kinds)
	return kinds, ignored, nil
}

func addIgnored(m map[string]string, name, why string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[name] = why
	return m
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "not regular"
}

// Listed is one entry of List: a pause and what could be read of it.
type Listed struct {
	Kind    string `json:"kind"`
	*Entry  `json:",omitempty"`
	Problem string `json:"problem,omitempty"` // unreadable content: the kind is paused all the same
}

// Ignored is an entry of paused/ that pauses nothing.
type Ignored struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

// List returns the paused kinds with their files' content (read capped,
// without blocking), and the entries that pause nothing.
func List(root string) ([]Listed, []Ignored, error) {
	kinds, ign, err := Kinds(root)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Listed, 0, len(kinds))
	for _, k := range kinds {
		l := Listed{Kind: k}
		e, err := Read(root, k)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // resumed meanwhile
		case errors.Is(err, fsq.ErrTooLarge):
			l.Problem = fmt.Sprintf("content unreadable: file too large (over %d bytes)", MaxFileSize)
		case errors.Is(err, errNotPauseFile):
			l.Problem = "content unreadable: not a pause file (JSON)"
		case err != nil:
			l.Problem = "content unreadable: " + oneLine(err.Error())
		default:
			l.Entry = e
		}
		out = append(out, l)
	}
	names := make([]string, 0, len(ign))
	for n := range ign {
		names = append(names, n)
	}
	sort.Strings(names)
	ignored := make([]Ignored, 0, len(names))
	for _, n := range names {
		ignored = append(ignored, Ignored{Name: n, Why: ign[n]})
	}
	return out, ignored, nil
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
