package fsq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ScanDirFunc lists dir like ScanDir, in directory order and without
// holding the listing: fn is called for each name that is not a dot file,
// with whether it is a real directory (symlinks are never followed). A
// missing dir yields nothing. An error of fn stops the scan and is
// returned. dir itself must be a real directory: a symlink or a FIFO
// planted in its place is an error, never followed or waited on. Memory
// stays that of one read of the directory (getdents64 into a 256 KiB
// buffer, one string per name), whatever its size: for incoming/ at a
// million jobs.
func ScanDirFunc(dir string, fn func(name string, isDir bool) error) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("scan %s: %w", dir, err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 256<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("scan %s: %w", dir, err)
		}
		if n <= 0 {
			return nil
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8,
		// name (NUL-terminated, padded to reclen).
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				return fmt.Errorf("scan %s: malformed directory entry", dir)
			}
			typ, nb := buf[off+18], buf[off+19:off+reclen]
			off += reclen
			if i := bytes.IndexByte(nb, 0); i >= 0 {
				nb = nb[:i]
			}
			if len(nb) == 0 || nb[0] == '.' {
				continue
			}
			name := string(nb)
			isDir := typ == unix.DT_DIR
			if typ == unix.DT_UNKNOWN { // a file system without d_type
				var st unix.Stat_t
				if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
					isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
				}
			}
			if err := fn(name, isDir); err != nil {
				return err
			}
		}
	}
}
