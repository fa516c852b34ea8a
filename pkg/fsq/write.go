package fsq

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/renameio/v2"
)

type writeConfig struct {
	syncDir bool
	perm    os.FileMode
}

// WriteOption tunes WriteFile.
type WriteOption func(*writeConfig)

// WithoutDirSync skips the fsync of the parent directory after the rename.
// The file's content is still fsynced before it replaces the old one, so
// the name always points at a complete file, old or new. Use it only where
// losing the new version to a power cut is harmless (heartbeats).
func WithoutDirSync() WriteOption { return func(c *writeConfig) { c.syncDir = false } }

// WithPerm sets the permissions of the written file (default 0644).
func WithPerm(perm os.FileMode) WriteOption { return func(c *writeConfig) { c.perm = perm } }

// WriteFile durably and atomically replaces path with data: a temp file
// beside the target (a dot file, invisible to scans) is written, fsynced,
// closed and renamed over path, then the directory is fsynced. If the
// directory has vanished the error matches ErrVanished.
func WriteFile(path string, data []byte, opts ...WriteOption) error {
	cfg := writeConfig{syncDir: true, perm: 0o644}
	for _, o := range opts {
		o(&cfg)
	}
	dir := filepath.Dir(path)
	hook(OpWrite, path, "")
	record(RecBefore, path, "", nil)
	// Not renameio.WriteFile: it keeps an existing file's permissions,
	// overriding WithPerm.
	if err := writeAtomic(path, dir, data, cfg.perm); err != nil {
		return fmt.Errorf("write %s: %w", path, classify(err))
	}
	if cfg.syncDir {
		return SyncDir(dir)
	}
	return nil
}

func writeAtomic(path, dir string, data []byte, perm os.FileMode) error {
	if err := DurabilityErr(); err != nil {
		return err
	}
	pf, err := renameio.NewPendingFile(path, renameio.WithTempDir(dir), renameio.WithStaticPermissions(perm))
	if err != nil {
		return err
	}
	defer pf.Cleanup()
	if _, err := pf.Write(data); err != nil {
		return err
	}
	// For test/crash: the temp file is written but not yet renamed (a
	// no-op in release builds).
	CrashPoint("fsq/write-rename:before")
	tmp := pf.Name()
	if err := pf.CloseAtomicallyReplace(); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) && pe.Op == "sync" {
			return lostDurability(path, err) // the temp file's fsync failed
		}
		return err
	}
	// CloseAtomicallyReplace fsyncs the temp file, closes it and renames
	// it over path, in that order.
	record(RecCreate, tmp, "", nil)
	record(RecWrite, tmp, "", data)
	record(RecFsync, tmp, "", nil)
	record(RecRename, tmp, path, nil)
	return nil
}

// CreateFile durably creates a new file holding data; it fails with
// ErrExists if path exists. The file is fsynced; the directory is not (the
// caller fsyncs the directory once after creating all its files).
func CreateFile(path string, data []byte) error { return createFile(path, data, true) }

// CreateFileUnsynced creates a new file holding data like CreateFile but
// fsyncs nothing: a later Barrier.Wait makes it durable.
func CreateFileUnsynced(path string, data []byte) error { return createFile(path, data, false) }

func createFile(path string, data []byte, sync bool) error {
	hook(OpCreate, path, "")
	record(RecBefore, path, "", nil)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, classify(err))
	}
	record(RecCreate, path, "", nil)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	record(RecWrite, path, "", data)
	return closeFile(f, path, sync)
}

// closeFile fsyncs f first if sync, then closes it.
func closeFile(f *os.File, path string, sync bool) error {
	if sync {
		if err := syncChecked(f, path); err != nil {
			f.Close()
			return fmt.Errorf("fsync %s: %w", path, err)
		}
		record(RecFsync, path, "", nil)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// AppendLine appends line (a newline is added) to path and fsyncs it. The
// file is created if missing, and then its directory is fsynced too.
func AppendLine(path string, line []byte) error {
	created, err := appendLine(path, line, true)
	if err != nil {
		return err
	}
	if created {
		return SyncDir(filepath.Dir(path))
	}
	return nil
}

// SyncDir fsyncs a directory, making the creates, renames and removes of
// its entries durable.
func SyncDir(dir string) error {
	hook(OpSyncDir, dir, "")
	record(RecBefore, dir, "", nil)
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, classify(err))
	}
	defer f.Close()
	if err := syncChecked(f, dir); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	record(RecSyncDir, dir, "", nil)
	return nil
}

// MkdirDurable creates dir (parents included) and fsyncs the parent of
// every directory it created. It is a no-op for an existing directory.
func MkdirDurable(dir string) error {
	if fi, err := os.Lstat(dir); err == nil {
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("mkdir %s: %w", dir, ErrSymlink)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirDurable(parent); err != nil {
			return err
		}
	}
	hook(OpMkdir, dir, "")
	record(RecBefore, dir, "", nil)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if !os.IsExist(err) {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
	} else {
		record(RecMkdir, dir, "", nil)
	}
	return SyncDir(parent)
}

// TempTarget tells whether name is a temp file of WriteFile (renameio's
// "." + target name + random digits) and, if so, the target's name.
func TempTarget(name string) (string, bool) {
	if len(name) < 3 || name[0] != '.' {
		return "", false
	}
	t := strings.TrimRight(name[1:], "0123456789")
	if t == "" || len(t) == len(name)-1 {
		return "", false
	}
	return t, true
}

// SweepTemps removes the temp files WriteFile left in dir when its process
// died, or the power was cut, between creating one and renaming it over
// its target: those whose target satisfies target and that are older than
// olderThan (a live WriteFile's temp file lives for milliseconds). The
// removals are not fsynced: a temp file that comes back after a power cut
// is swept again. The directory keeps its mtime (watchdogd reads it as the
// time a job last moved). It returns how many files it removed.
func SweepTemps(dir string, olderThan time.Duration, target func(name string) bool) (int, error) {
	dfi, err := os.Lstat(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("sweep temps %s: %w", dir, err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("sweep temps %s: %w", dir, err)
	}
	cutoff := time.Now().Add(-olderThan)
	n := 0
	for _, de := range des {
		t, ok := TempTarget(de.Name())
		if !ok || !de.Type().IsRegular() || !target(t) {
			continue
		}
		if fi, err := de.Info(); err != nil || fi.ModTime().After(cutoff) {
			continue
		}
		p := filepath.Join(dir, de.Name())
		hook(OpRemove, p, "")
		record(RecBefore, p, "", nil)
		if err := os.Remove(p); err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return n, fmt.Errorf("sweep temps %s: %w", dir, err)
		}
		record(RecRemove, p, "", nil)
		n++
	}
	if n > 0 {
		_ = os.Chtimes(dir, time.Time{}, dfi.ModTime())
	}
	return n, nil
}
