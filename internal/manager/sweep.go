package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/farro-dev/farro/internal/metrics"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// sweepTmp durably removes every entry of tmp/ older than TmpMaxAge:
// submits that crashed before their final rename, and jobs whose removal
// by retention was cut short; and the temp files of interrupted
// quarantine notes in corrupt/. A build whose submitter is still alive
// (stalled, or stopped, longer than TmpMaxAge) holds its flock and is
// left alone: its submit goes on when it wakes. The sweep is the spool
// store's (spoolstore's SweepTmp); the manager logs what it removed.
func (m *Manager) sweepTmp(ctx context.Context) error {
	return m.store.SweepTmp(ctx, m.cfg.TmpMaxAge, func(sw spoolstore.Swept) {
		switch {
		case sw.Note && sw.Err != nil:
			m.log.Error().Err(sw.Err).Str("path", sw.Path).Msg("cannot sweep interrupted quarantine note")
		case sw.Note:
			m.log.Info().Str("path", sw.Path).Msg("swept interrupted quarantine note")
		case errors.Is(sw.Err, job.ErrBuilding):
			// Debug: every pass meets it again while its submitter lives.
			m.log.Debug().Str("path", sw.Path).Dur("age_ms", time.Since(sw.ModTime).Round(time.Second)).Msg("tmp/ entry older than tmp-max-age kept: a live submit is building it")
		case sw.Err != nil:
			m.log.Error().Err(sw.Err).Str("path", sw.Path).Msg("cannot sweep tmp leftover")
		default:
			m.log.Info().Str("path", sw.Path).Dur("age_ms", time.Since(sw.ModTime).Round(time.Second)).Msg("swept tmp leftover")
		}
	})
}

// applyRetention removes terminal jobs (succeeded, killed) that finished
// more than Retention ago (finished_at, or updated_at when it is unset).
// One scan looks at the next RetentionChunk entries of each directory
// (a lap over a big directory spans several scans), and reads the
// job.json only of a job whose directory was last modified before the
// cutoff: a job's finish time is written into it (job.json replaced)
// before it enters its terminal directory, so a directory modified
// since the cutoff holds a job that finished since, or one touched after
// it finished, which a later scan meets once the cutoff has passed that
// modification. The scan reads without the lock; each removal goes through
// job.Spool.Expire (spoolstore's ExpireListed), which re-reads the job
// under its lock and leaves it alone if it moved or finished again
// meanwhile. A pass that removed anything logs one line (how many, by
// state, the oldest finish time); each removal counts in
// farro_retention_removed_total.
func (m *Manager) applyRetention(ctx context.Context) error {
	cutoff := time.Now().Add(-m.cfg.Retention)
	var sum retentionPass
	var errs []error
	defer func() { sum.log(m, cutoff) }()
	for _, st := range []job.State{job.Succeeded, job.Killed} {
		ents, _, err := m.retainCur[st].Next(m.cfg.RetentionChunk)
		if err != nil {
			errs = append(errs, fmt.Errorf("retention: %w", err))
		}
		for _, id := range ents.Dirs {
			if ctx.Err() != nil {
				return errors.Join(errs...)
			}
			if err := job.ValidateID(id); err != nil {
				m.report(st, id, m.store.QuarantineUnnamed(st, id, err))
				continue
			}
			if mt, err := m.store.ChangedAt(st, id); err != nil || !mt.Before(cutoff) {
				continue // gone, or modified since the cutoff: not expired yet
			}
			j, err := m.store.ReadIn(st, id)
			if err != nil {
				if errors.Is(err, job.ErrCorrupt) {
					err = m.quarantine(st, id, err)
				}
				m.report(st, id, err)
				continue
			}
			if !j.Finished().Before(cutoff) {
				continue
			}
			if m.beforeExpire != nil {
				m.beforeExpire(id)
			}
			removed, err := m.store.ExpireListed(id, Actor, cutoff)
			switch {
			case removed != nil:
				// Gone from the spool (err, if any: tmp/ leftover for the sweep).
				sum.add(removed)
				metrics.RetentionRemoved(removed.Status)
				m.log.Debug().Str("job_id", id).Str("state", string(removed.Status)).Time("finished_at", removed.Finished()).Msg("removed by retention")
				if err != nil {
					m.log.Warn().Err(err).Str("job_id", id).Msg("retention left a tmp/ leftover")
				}
			case errors.Is(err, job.ErrNotExpired), errors.Is(err, job.ErrState):
				m.log.Debug().Err(err).Str("job_id", id).Msg("retention: job moved or finished again meanwhile; kept")
			default:
				m.report(st, id, err)
			}
		}
	}
	for id, st := range m.busy {
		if st.Terminal() { // retention retries on its next scan, not through the busy list
			delete(m.busy, id)
		}
	}
	return errors.Join(errs...)
}

// retentionPass sums up what one retention pass removed, for its one
// log line.
type retentionPass struct {
	removed, succeeded, killed int
	oldest                     time.Time
}

func (p *retentionPass) add(j *job.Job) {
	p.removed++
	if j.Status == job.Killed {
		p.killed++
	} else {
		p.succeeded++
	}
	if f := j.Finished(); p.oldest.IsZero() || f.Before(p.oldest) {
		p.oldest = f
	}
}

func (p *retentionPass) log(m *Manager, cutoff time.Time) {
	if p.removed == 0 {
		return
	}
	m.log.Info().Int("removed", p.removed).Int("succeeded", p.succeeded).Int("killed", p.killed).
		Time("oldest_finished_at", p.oldest).Time("cutoff", cutoff).
		Int64("retention_s", int64(m.cfg.Retention/time.Second)).Msg("retention removed terminal jobs")
}
