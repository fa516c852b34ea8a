package fsq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// The operations in this file make no change durable: each leaves that to
// a later Barrier.Wait, which a transaction places where its order on disk
// matters. Between barriers a power cut may keep any subset of them.

// Staged is a new version of a file, written beside it under a temp name
// and not yet in place: Barrier.Wait makes its content durable, then
// Replace puts it in place with one rename. It is WriteFile cut in two, so
// that many transactions can share the flush between the halves.
type Staged struct {
	tmp, path string
	done      bool
	spares    *SparePool // staged in a spare (SparePool.Stage): swapped in, given back
}

// Stage writes data to a temp file beside path (a dot file named like
// WriteFile's, so scans skip it and SweepTemps clears it if the process
// dies before Replace). Nothing is fsynced.
func Stage(path string, data []byte) (*Staged, error) {
	dir := filepath.Dir(path)
	hook(OpCreate, path, "")
	record(RecBefore, path, "", nil)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"*")
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", path, classify(err))
	}
	record(RecCreate, f.Name(), "", nil)
	st := &Staged{tmp: f.Name(), path: path}
	if err := f.Chmod(0o644); err == nil {
		_, err = f.Write(data)
	}
	if err != nil {
		f.Close()
		st.Discard()
		return nil, fmt.Errorf("stage %s: %w", path, classify(err))
	}
	record(RecWrite, f.Name(), "", data)
	if err := f.Close(); err != nil {
		st.Discard()
		return nil, fmt.Errorf("stage %s: %w", path, err)
	}
	return st, nil
}

// Replace renames the staged file over its target. Call it after a
// Barrier.Wait that followed Stage, or a power cut may leave the target
// empty or torn. A vanished directory matches ErrVanished.
func (s *Staged) Replace() error {
	if s.done {
		return fmt.Errorf("replace %s: already replaced or discarded", s.path)
	}
	if s.spares != nil {
		if err := s.spares.exchange(s); err != nil {
			return fmt.Errorf("replace %s: %w", s.path, classify(err))
		}
		s.done = true
		return nil
	}
	hook(OpRename, s.tmp, s.path)
	record(RecBefore, s.tmp, s.path, nil)
	if err := os.Rename(s.tmp, s.path); err != nil {
		return fmt.Errorf("replace %s: %w", s.path, classify(err))
	}
	s.done = true
	record(RecRename, s.tmp, s.path, nil)
	return nil
}

// Discard removes the staged file if it is still there. It is safe to
// call after Replace (it does nothing then).
func (s *Staged) Discard() {
	if s.done {
		return
	}
	s.done = true
	if s.spares != nil {
		s.spares.release(s.tmp)
		return
	}
	hook(OpRemove, s.tmp, "")
	record(RecBefore, s.tmp, "", nil)
	if err := os.Remove(s.tmp); err == nil {
		record(RecRemove, s.tmp, "", nil)
	}
}

// RenameUnsynced moves src to dst like Rename (never replacing dst; a
// missing src is ErrVanished) but fsyncs nothing.
func RenameUnsynced(src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("rename %s -> %s: %w", src, dst, ErrExists)
	}
	hook(OpRename, src, dst)
	record(RecBefore, src, dst, nil)
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("rename %s -> %s: %w", src, dst, classify(err))
	}
	record(RecRename, src, dst, nil)
	return nil
}

// AppendLineUnsynced appends line and a newline to path, creating the file
// if it is missing, and fsyncs nothing. Readers must skip a torn last
// line: a power cut before the next barrier may keep part of it.
func AppendLineUnsynced(path string, line []byte) error {
	_, err := appendLine(path, line, false)
	return err
}

// appendLine appends line and a newline to path, creating it if missing
// (created says so), and fsyncs it if sync.
func appendLine(path string, line []byte, sync bool) (created bool, err error) {
	hook(OpAppend, path, "")
	record(RecBefore, path, "", nil)
	f, err := openAppend(path, false)
	if errors.Is(err, os.ErrNotExist) {
		f, err = openAppend(path, true)
		if err == nil {
			created = true
			record(RecCreate, path, "", nil)
		}
	}
	if err != nil {
		return false, fmt.Errorf("append %s: %w", path, classify(err))
	}
	buf := make([]byte, 0, len(line)+1)
	buf = append(append(buf, line...), '\n')
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return created, fmt.Errorf("append %s: %w", path, err)
	}
	record(RecWrite, path, "", buf)
	return created, closeFile(f, path, sync)
}

// openAppend opens path for appending (creating it, exclusively, if
// create) without ever blocking or following: O_NONBLOCK makes a FIFO
// planted there fail at once (ENXIO) instead of waiting for a reader, a
// symlink is ErrSymlink, and anything but a regular file is
// ErrNotRegular. A missing file matches fs.ErrNotExist.
func openAppend(path string, create bool) (*os.File, error) {
	flags := unix.O_WRONLY | unix.O_APPEND | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	if create {
		flags |= unix.O_CREAT | unix.O_EXCL
	}
	fd, err := unix.Open(path, flags, 0o644)
	if err != nil {
		switch {
		case errors.Is(err, syscall.ELOOP):
			return nil, ErrSymlink
		case errors.Is(err, syscall.ENXIO), errors.Is(err, syscall.EISDIR):
			return nil, ErrNotRegular
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
		return nil, fmt.Errorf("%w (mode %#o)", ErrNotRegular, st.Mode&unix.S_IFMT)
	}
	return os.NewFile(uintptr(fd), path), nil
}
