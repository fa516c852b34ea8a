package fsq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// OpenRegular opens the regular file at path for reading, with the
// safety of ReadFileCapped but without a cap, for a caller that streams
// it (farroctl logs): O_NOFOLLOW|O_NONBLOCK (a symlink is ErrSymlink, a
// FIFO opens at once), and anything but a regular file is ErrNotRegular.
// It returns the file's size when opened: a caller that reads no more
// than that never chases a file that keeps growing. A missing file
// matches fs.ErrNotExist.
func OpenRegular(path string) (*os.File, int64, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, syscall.ELOOP):
			return nil, 0, fmt.Errorf("open %s: %w", path, ErrSymlink)
		case errors.Is(err, syscall.ENXIO):
			return nil, 0, fmt.Errorf("open %s: %w", path, ErrNotRegular)
		}
		return nil, 0, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, 0, fmt.Errorf("open %s: %w (mode %#o)", path, ErrNotRegular, st.Mode&unix.S_IFMT)
	}
	return os.NewFile(uintptr(fd), path), st.Size, nil
}
