package job

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// Priority hints. A job submitted with a priority other than the
// default (0) also gets an empty file incoming/.priority/<priority>.<id>, created in
// the same group commit as the job (no sync of its own). agentd learns
// from one listing of that directory which jobs to claim before the
// default-priority ones (and which after), instead of reading every job.json of incoming/
// before its first claim. A hint is only a hint: the claim reads job.json
// and verifies; a hint that is missing (lost, or a spool older than
// hints) costs only order, one that is stale or hostile (a FIFO, a huge
// file: its content is never read) costs one read of the job's job.json.
// Like every dot entry, the directory is invisible to the listings of
// incoming/.

// PriorityHintDir is the name, in incoming/, of the hints' directory.
const PriorityHintDir = ".priority"

// HintDir is incoming/.priority.
func (s *Spool) HintDir() string { return s.Path(Queued.Dir(), PriorityHintDir) }

// HintName is the name of the hint of job id with priority prio.
func HintName(prio int, id string) string { return strconv.Itoa(prio) + "." + id }

// ParseHint splits a hint's name; ok is false for a name that is not a
// hint of a priority other than 0 and a valid job id.
func ParseHint(name string) (prio int, id string, ok bool) {
	p, id, found := strings.Cut(name, ".")
	if !found || len(p) > 10 {
		return 0, "", false
	}
	prio, err := strconv.Atoi(p)
	if err != nil || prio == 0 || ValidateID(id) != nil {
		return 0, "", false
	}
	return prio, id, true
}

// writeHint creates j's hint if its priority is not the default. It
// syncs nothing but the hints' directory when it is made: the caller's
// barrier makes the hint durable with the job.
func (s *Spool) writeHint(j *Job) error {
	if j.Priority == 0 {
		return nil
	}
	return s.RepairHint(j.Priority, j.ID)
}

// RepairHint creates the hint (prio, id) if it is missing, unsynced (the
// hints' directory is made durably). agentd calls it for a queued job
// it read whose hint was missing.
func (s *Spool) RepairHint(prio int, id string) error {
	if prio == 0 || ValidateID(id) != nil {
		return nil
	}
	dir := s.HintDir()
	if err := fsq.MkdirDurable(dir); err != nil {
		return err
	}
	err := fsq.CreateFileUnsynced(filepath.Join(dir, HintName(prio, id)), nil)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}

// ScanHints calls fn for every hint, in directory order, without holding
// the listing. Names that are not hints are skipped.
func (s *Spool) ScanHints(fn func(prio int, id string)) error {
	return fsq.ScanDirFunc(s.HintDir(), func(name string, _ bool) error {
		if prio, id, ok := ParseHint(name); ok {
			fn(prio, id)
		}
		return nil
	})
}

// DropHint removes the hint (prio, id), unsynced, for a caller that
// knows its job terminal (agentd after a commit to succeeded or killed).
// A hint that comes back after a power cut is dropped by DropStaleHint.
func (s *Spool) DropHint(prio int, id string) error {
	if prio == 0 || ValidateID(id) != nil {
		return nil
	}
	err := os.Remove(filepath.Join(s.HintDir(), HintName(prio, id)))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("drop hint: %w", err)
	}
	return nil
}

// DropStaleHint removes the hint (prio, id) when it can no longer serve:
// older than TempGrace (a Submit in flight has not placed its job yet)
// and its job is in no state from which it could come back to incoming/
// (gone, or terminal: a retry writes the hint again). A job found in
// incoming/ keeps its hint. The removal is not synced: a hint that comes
// back after a power cut is dropped again. It reports whether it removed
// the hint.
func (s *Spool) DropStaleHint(prio int, id string) (bool, error) {
	p := filepath.Join(s.HintDir(), HintName(prio, id))
	fi, err := os.Lstat(p)
	if err != nil {
		if os.IsNotExist(err) {
			return false, nil
		}
		return false, err
	}
	if time.Since(fi.ModTime()) < TempGrace {
		return false, nil
	}
	locs, err := s.Locate(id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, err
	}
	for _, l := range locs {
		if !l.State.Terminal() {
			return false, nil
		}
	}
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return false, fmt.Errorf("drop hint %s: %w", p, err)
	}
	return true, nil
}
