package fsq

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// Entries is the result of scanning one spool directory.
type Entries struct {
	// Dirs are the names of real subdirectories, sorted.
	Dirs []string
	// Hostile are names that must not be there: symlinks and other
	// non-directories that are not dot files. Callers quarantine them.
	Hostile []string
}

// ScanDir lists dir. Dot files (temp files of atomic writes) are skipped,
// symlinks are never followed, and anything that is not a directory is
// reported in Hostile. A missing dir yields no entries.
func ScanDir(dir string) (Entries, error) {
	var out Entries
	f, err := os.Open(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return out, nil
		}
		return out, fmt.Errorf("scan %s: %w", dir, err)
	}
	defer f.Close()
	for {
		des, err := f.ReadDir(4096)
		for _, de := range des {
			name := de.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			if de.Type().IsDir() {
				out.Dirs = append(out.Dirs, name)
			} else {
				out.Hostile = append(out.Hostile, name)
			}
		}
		if err != nil || len(des) == 0 {
			break
		}
	}
	sort.Strings(out.Dirs)
	return out, nil
}

// IsRealDir reports whether path is a directory and not a symlink to one.
func IsRealDir(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}
