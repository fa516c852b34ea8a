package fsq

import (
	"fmt"
	"os"
	"path/filepath"
)

// Rename durably moves src to dst (a file or a directory) and fsyncs both
// parent directories, destination first. It never replaces an existing
// destination: a directory is refused with ErrExists even when dst is an
// empty directory. A missing src is reported as ErrVanished: someone else
// moved it first.
func Rename(src, dst string) error {
	if err := RenameUnsynced(src, dst); err != nil {
		return err
	}
	sdir, ddir := filepath.Dir(src), filepath.Dir(dst)
	if err := SyncDir(ddir); err != nil {
		return err
	}
	if sdir != ddir {
		return SyncDir(sdir)
	}
	return nil
}

// RemoveAll durably removes path and everything below it, then fsyncs its
// parent. A missing path is not an error.
func RemoveAll(path string) error {
	hook(OpRemove, path, "")
	record(RecBefore, path, "", nil)
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	record(RecRemove, path, "", nil)
	return SyncDir(filepath.Dir(path))
}
