package fsq

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// ScanDirFunc lists dir like ScanDir, in directory order and without
// holding the listing: fn is called for each name that is not a dot file,
// with whether it is a real directory (symlinks are never followed). A
// missing dir yields nothing. An error of fn stops the scan and is
// returned. dir itself must be a real directory: a symlink or a FIFO
// planted in its place is an error, never followed or waited on. Memory
// stays that of one read of the directory, whatever its
// size: for incoming/ at a million jobs.
func ScanDirFunc(dir string, fn func(name string, isDir bool) error) error {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return fmt.Errorf("scan %s: %w", dir, err)
	}
	defer f.Close()
	for {
		des, err := f.ReadDir(1024)
		for _, de := range des {
			name := de.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			if ferr := fn(name, de.Type().IsDir()); ferr != nil {
				return ferr
			}
		}
		if err != nil || len(des) == 0 {
			return nil
		}
	}
}
