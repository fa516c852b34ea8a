package fsq

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// OwnerFile is the name of the file inside a lock directory that says who
// holds it.
const OwnerFile = "owner"

// TryLock takes the lock at path by creating it with mkdir(2), which is
// atomic, and writes owner into its owner file. It fails with ErrLocked if
// the directory exists. Locks are deliberately not fsynced: after a power
// cut every holder is dead anyway, and recovery treats a missing lock and a
// lock without an owner file alike.
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
	hook(OpCreate, filepath.Join(path, OwnerFile), "")
	record(RecBefore, filepath.Join(path, OwnerFile), "", nil)
	f, err := os.OpenFile(filepath.Join(path, OwnerFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err == nil {
		record(RecCreate, filepath.Join(path, OwnerFile), "", nil)
		_, err = f.Write(owner)
		if err == nil {
			record(RecWrite, filepath.Join(path, OwnerFile), "", owner)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		_ = Unlock(path)
		return fmt.Errorf("lock %s: write owner: %w", path, err)
	}
	return nil
}

// ReadOwner returns the content of the lock's owner file. A missing file
// matches fs.ErrNotExist; a symlink in its place is refused.
func ReadOwner(path string) ([]byte, error) {
	return ReadFileNoFollow(filepath.Join(path, OwnerFile))
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

// ReadFileNoFollow reads a file, refusing a symlink in its place.
func ReadFileNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("read %s: %w", path, ErrSymlink)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", path)
	}
	return io.ReadAll(f)
}
