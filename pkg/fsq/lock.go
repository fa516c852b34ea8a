package fsq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// OwnerFile is the name of the file inside a lock directory that says who
// holds it.
const OwnerFile = "owner"

// TryLock takes the lock at path by creating it with mkdir(2), which is
// atomic, and writes owner into its owner file. It fails with ErrLocked if
// the directory exists. Locks are deliberately not fsynced: after a power
// cut every holder is dead anyway, and recovery treats a missing lock and a
// lock without an owner file alike.
//
// The lock is held once this call has created the owner file (O_EXCL) in
// the directory it made and path still names that directory. A caller that
// stalls between the mkdir and the owner file can find its ownerless lock
// recovered and taken by someone else meanwhile: the owner is therefore
// written through a descriptor of the directory (never into someone else's
// lock), path is checked to still be that directory afterwards (else
// ErrLocked), and a failure removes only what this call created: its own
// owner file, and the directory only while path still names it (rmdir,
// which never removes a lock that has an owner file).
func TryLock(path string, owner []byte) error {
	hook(OpMkdir, path, "")
	record(RecBefore, path, "", nil)
	if err := os.Mkdir(path, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("lock %s: %w", path, ErrLocked)
		}
		return fmt.Errorf("lock %s: %w", path, classify(err))
	}
	record(RecMkdir, path, "", nil)
	ownerPath := filepath.Join(path, OwnerFile)
	dirfd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			// Gone, or replaced by something else already: not ours.
			return fmt.Errorf("lock %s: taken away before its owner was written (%v): %w", path, err, ErrLocked)
		}
		// rmdir removes only an empty directory: an ownerless lock,
		// which nobody holds yet (see above).
		_ = unix.Rmdir(path)
		return fmt.Errorf("lock %s: %w", path, &fs.PathError{Op: "open", Path: path, Err: err})
	}
	defer unix.Close(dirfd)
	var dst unix.Stat_t
	if err := unix.Fstat(dirfd, &dst); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	hook(OpCreate, ownerPath, "")
	record(RecBefore, ownerPath, "", nil)
	ours := func() bool { // path still names the directory we hold a descriptor of
		var st unix.Stat_t
		return unix.Lstat(path, &st) == nil && st.Dev == dst.Dev && st.Ino == dst.Ino
	}
	created := false
	var ost unix.Stat_t
	fd, err := unix.Openat(dirfd, OwnerFile, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err == nil {
		created = true
		f := os.NewFile(uintptr(fd), ownerPath)
		err = unix.Fstat(fd, &ost)
		if err == nil {
			record(RecCreate, ownerPath, "", nil)
			_, err = f.Write(owner)
		}
		if err == nil {
			record(RecWrite, ownerPath, "", owner)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	} else {
		err = &fs.PathError{Op: "open", Path: ownerPath, Err: err}
		if errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist) {
			// Another caller's owner file is there (the directory
			// opened is not the one this call made), or the directory
			// was removed meanwhile: either way the lock is not ours.
			err = fmt.Errorf("%w: %w", ErrLocked, err)
		}
	}
	if err == nil && !ours() {
		err = fmt.Errorf("taken away while its owner was written: %w", ErrLocked)
	}
	if err != nil {
		if created {
			var st unix.Stat_t
			if unix.Fstatat(dirfd, OwnerFile, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Dev == ost.Dev && st.Ino == ost.Ino {
				_ = unix.Unlinkat(dirfd, OwnerFile, 0)
			}
		}
		if ours() {
			// rmdir, never unlink: it fails on a lock that has an owner
			// file, and a lock without one is held by nobody yet.
			_ = unix.Rmdir(path)
		}
		return fmt.Errorf("lock %s: write owner: %w", path, err)
	}
	return nil
}

// ReadOwner returns the content of the lock's owner file, capped at
// OwnerReadCap. A missing file matches fs.ErrNotExist; a symlink, anything
// that is not a regular file, or a file over the cap is refused (see
// IsHostile).
func ReadOwner(path string) ([]byte, error) {
	return ReadFileCapped(filepath.Join(path, OwnerFile), OwnerReadCap)
}

// Unlock removes the lock at path (its owner file, anything else in it, and
// the directory). A lock that is already gone is not an error.
func Unlock(path string) error {
	hook(OpRemove, path, "")
	record(RecBefore, path, "", nil)
	// The common lock is a real directory holding only its owner file:
	// lstat, unlink, rmdir. Anything else (a symlink planted in its place,
	// whose target must not be touched; a handler record or a recovery
	// guard inside) takes RemoveAll.
	if fi, err := os.Lstat(path); err != nil || !fi.IsDir() {
		return unlockAll(path)
	}
	if err := os.Remove(filepath.Join(path, OwnerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return unlockAll(path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return unlockAll(path)
	}
	record(RecRemove, path, "", nil)
	return nil
}

func unlockAll(path string) error {
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("unlock %s: %w", path, err)
	}
	record(RecRemove, path, "", nil)
	return nil
}
