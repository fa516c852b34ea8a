package fsq

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Caps of the reads of spool files. Every read of a file found in the
// spool is capped: anything can be planted there (by an exec handler, which
// runs as the spool's user with its job directory as cwd, or by an
// operator's mistake), and a daemon must neither block on it nor load it
// whole.
const (
	// DefaultReadCap is the cap of ReadFileNoFollow.
	DefaultReadCap = 4 << 20
	// OwnerReadCap is the cap of ReadOwner: an owner file is a few hundred
	// bytes of JSON.
	OwnerReadCap = 4 << 10
)

var (
	// ErrNotRegular reports a FIFO, socket, device or directory found
	// where a regular file must be. It is refused without blocking.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge reports a file bigger than the cap of its read.
	ErrTooLarge = errors.New("file too large")
)

// IsHostile reports whether err says that the entry read is not a file the
// spool could have written: a symlink, something that is not a regular
// file, or a file over its cap. Callers quarantine such entries instead of
// retrying them forever.
func IsHostile(err error) bool {
	return errors.Is(err, ErrSymlink) || errors.Is(err, ErrNotRegular) || errors.Is(err, ErrTooLarge)
}

// ReadFileCapped reads the regular file at path, refusing anything else
// without blocking and without reading more than max bytes:
//
//   - the file is opened with O_NOFOLLOW|O_NONBLOCK, so a symlink fails
//     (ErrSymlink) and a FIFO opens at once instead of waiting for a
//     writer; a unix socket cannot be opened at all (ENXIO);
//   - the descriptor is fstat'ed: anything but a regular file is
//     ErrNotRegular;
//   - a size over max is ErrTooLarge before a byte is read, and at most
//     max+1 bytes are read, so a file that grows meanwhile is ErrTooLarge
//     too.
//
// A missing file matches fs.ErrNotExist.
func ReadFileCapped(path string, max int64) ([]byte, error) {
	if max < 0 {
		max = 0
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, syscall.ELOOP):
			return nil, fmt.Errorf("read %s: %w", path, ErrSymlink)
		case errors.Is(err, syscall.ENXIO):
			// A unix socket (or a device without its driver).
			return nil, fmt.Errorf("read %s: %w", path, ErrNotRegular)
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("read %s: %w (mode %#o)", path, ErrNotRegular, st.Mode&unix.S_IFMT)
	}
	if st.Size > max {
		return nil, fmt.Errorf("read %s: %w: %d bytes, cap %d", path, ErrTooLarge, st.Size, max)
	}
	buf := make([]byte, 0, st.Size+1)
	for int64(len(buf)) <= max {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		want := min(int64(cap(buf)), max+1)
		n, err := f.Read(buf[len(buf):want])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
	return nil, fmt.Errorf("read %s: %w: grew over the cap of %d bytes", path, ErrTooLarge, max)
}

// ReadFileNoFollow is ReadFileCapped with DefaultReadCap (4 MiB). Prefer
// ReadFileCapped with a cap that fits the file read.
func ReadFileNoFollow(path string) ([]byte, error) {
	return ReadFileCapped(path, DefaultReadCap)
}
