package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// sweepTmp durably removes every entry of tmp/ older than TmpMaxAge:
// submits that crashed before their final rename, and jobs whose removal
// by retention was cut short.
func (m *Manager) sweepTmp(ctx context.Context) error {
	dir := m.spool.Path(job.TmpDir)
	des, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("sweep tmp: %w", err)
	}
	cutoff := time.Now().Add(-m.cfg.TmpMaxAge)
	for _, de := range des {
		if ctx.Err() != nil {
			return nil
		}
		fi, err := de.Info() // lstat: a symlink is judged (and removed) itself
		if err != nil || fi.ModTime().After(cutoff) {
			continue
		}
		p := filepath.Join(dir, de.Name())
		fsq.CrashPoint("sweep/remove:before") // for test/crash; no-op in release builds
		if err := fsq.RemoveAll(p); err != nil {
			m.log.Error().Err(err).Str("path", p).Msg("cannot sweep tmp leftover")
			continue
		}
		m.log.Info().Str("path", p).Dur("age_ms", time.Since(fi.ModTime()).Round(time.Second)).Msg("swept tmp leftover")
	}
	m.sweepQuarantineTemps(cutoff)
	return nil
}

// quarantineTemp matches the temp file of an interrupted write of a
// quarantine note (".<name>.quarantine.json<digits>", see
// job.Spool.Quarantine): the one kind of temp file that no job's lock
// covers, for it sits in corrupt/ itself.
var quarantineTemp = regexp.MustCompile(`^\..+\.quarantine\.json-?[0-9]+$`)

// sweepQuarantineTemps removes the quarantine-note temp files in corrupt/
// older than cutoff. Nothing else in corrupt/ is ever removed.
func (m *Manager) sweepQuarantineTemps(cutoff time.Time) {
	dir := m.spool.Path(job.CorruptDir)
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		fi, err := de.Info()
		if err != nil || !fi.Mode().IsRegular() || !quarantineTemp.MatchString(de.Name()) || fi.ModTime().After(cutoff) {
			continue
		}
		p := filepath.Join(dir, de.Name())
		if err := os.Remove(p); err != nil {
			m.log.Error().Err(err).Str("path", p).Msg("cannot sweep interrupted quarantine note")
			continue
		}
		m.log.Info().Str("path", p).Msg("swept interrupted quarantine note")
	}
}

// applyRetention removes terminal jobs (succeeded, killed) that finished
// more than Retention ago (finished_at, or updated_at when it is unset).
func (m *Manager) applyRetention(ctx context.Context) error {
	cutoff := time.Now().Add(-m.cfg.Retention)
	removed := 0
	var errs []error
	for _, st := range []job.State{job.Succeeded, job.Killed} {
		ents, err := fsq.ScanDir(m.spool.StateDir(st))
		if err != nil {
			errs = append(errs, fmt.Errorf("retention: %w", err))
			continue
		}
		for _, id := range ents.Dirs {
			if ctx.Err() != nil {
				return errors.Join(errs...)
			}
			dir := m.spool.JobDir(st, "", id)
			if err := job.ValidateID(id); err != nil {
				m.report(st, id, m.quarantineUnnamed(dir, err))
				continue
			}
			j, err := job.ReadJob(dir)
			if err != nil {
				if errors.Is(err, job.ErrCorrupt) {
					err = m.quarantine(id, dir, err)
				}
				m.report(st, id, err)
				continue
			}
			t := j.UpdatedAt
			if j.FinishedAt != nil {
				t = *j.FinishedAt
			}
			if t.After(cutoff) {
				continue
			}
			if err := m.expire(id, dir); err != nil {
				m.report(st, id, err)
				continue
			}
			removed++
			m.spool.StreamRemoval(j, Actor, "retention")
			m.log.Debug().Str("job_id", id).Str("state", string(st)).Time("finished_at", t).Msg("removed by retention")
		}
	}
	for id, st := range m.busy {
		if st.Terminal() { // retention retries on its next scan, not through the busy list
			delete(m.busy, id)
		}
	}
	if removed > 0 {
		m.log.Info().Int("removed", removed).Dur("retention_ms", m.cfg.Retention).Msg("retention applied")
	}
	return errors.Join(errs...)
}

// expire removes the terminal job at dir under its lock: it is first
// renamed into tmp/ (atomic, so the job is never seen half-deleted), then
// deleted; a crash in between leaves a tmp/ leftover for the sweep.
func (m *Manager) expire(id, dir string) error {
	// The fsq.CrashPoint calls mark the steps for the crash-simulation
	// harness (test/crash); they do nothing in release builds.
	lock := m.spool.LockPath(id)
	fsq.CrashPoint("expire/lock:before")
	if err := fsq.TryLock(lock, ownerBytes()); err != nil {
		return err
	}
	defer func() {
		fsq.CrashPoint("expire/unlock:before")
		_ = fsq.Unlock(lock)
		fsq.CrashPoint("expire/unlock:after")
	}()
	dst := m.spool.Path(job.TmpDir, id+".expired."+strconv.FormatInt(time.Now().UnixNano(), 36))
	fsq.CrashPoint("expire/rename:before")
	if err := fsq.Rename(dir, dst); err != nil {
		return fmt.Errorf("retention %s: %w", id, err)
	}
	fsq.CrashPoint("expire/remove:before")
	if err := fsq.RemoveAll(dst); err != nil {
		return fmt.Errorf("retention %s: %w", id, err)
	}
	return nil
}
