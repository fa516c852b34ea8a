package job

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/farro-dev/farro/pkg/fsq"
)

// StreamSegments lists the stream's segments (their names, oldest
// first). Entries that are not named like a segment are left out; a
// missing events/ is an empty stream.
func (s *Spool) StreamSegments() ([]string, error) {
	ents, err := os.ReadDir(s.Path(StreamDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("event stream: %w", err)
	}
	var names []string
	for _, e := range ents {
		if _, ok := ParseStreamSegment(e.Name()); ok {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// OpenStreamSegment opens a segment for reading without blocking or
// following a link: anything but a regular file is refused
// (fsq.ErrSymlink, fsq.ErrNotRegular). Read it line by line with a cap per
// line (MaxStreamLine): a segment may be large.
func (s *Spool) OpenStreamSegment(name string) (*os.File, error) {
	if _, ok := ParseStreamSegment(name); !ok {
		return nil, fmt.Errorf("event stream: %q is not a segment name", name)
	}
	path := s.Path(StreamDir, name)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ELOOP):
			return nil, fmt.Errorf("event stream: %s: %w", path, fsq.ErrSymlink)
		case errors.Is(err, unix.ENXIO):
			return nil, fmt.Errorf("event stream: %s: %w", path, fsq.ErrNotRegular)
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("event stream: %s: %w (mode %#o)", path, fsq.ErrNotRegular, st.Mode&unix.S_IFMT)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// ExpireStream removes the segments whose hour ended before cutoff
// (managerd's --events-retention) and returns their names. Only regular
// files are removed; anything else named like a segment is left alone.
// The removals are not fsynced: a segment that comes back after a power
// cut is removed again.
func (s *Spool) ExpireStream(cutoff time.Time) ([]string, error) {
	names, err := s.StreamSegments()
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, name := range names {
		hour, _ := ParseStreamSegment(name)
		if !hour.Add(time.Hour).Before(cutoff) {
			break // sorted: every later segment is newer
		}
		path := s.Path(StreamDir, name)
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("event stream: %w", err))
			continue
		}
		removed = append(removed, filepath.Base(path))
	}
	return removed, errors.Join(errs...)
}
