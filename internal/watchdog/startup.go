package watchdog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// StartupStats counts what the startup reconcile found.
type StartupStats struct {
	Jobs        int // job directories read
	Consistent  int // status matched the directory
	Reconciled  int // status disagreed and recovery fixed it
	Quarantined int // unreadable: moved to corrupt/
	Busy        int // status disagreed but the lock was held: left to the lock checks
	Schema      int // unknown schema version: left in place
	Hostile     int // entries that cannot be jobs (left to farroctl fsck)
	Failed      int // recovery failed (logged)
	Temps       int // temp files of atomic writes whose writer died, removed
}

// Startup is the full reconcile pass made when the watchdog starts: it
// reads every job.json of every state directory once and reconciles each
// job whose status disagrees with its directory, which rolls forward or
// back the transactions a crash or power cut interrupted. Jobs whose lock
// is held are left to the lock checks. It also learns the locks of
// incoming/. It logs one summary line.
func (w *Watchdog) Startup(ctx context.Context) error {
	start := time.Now()
	var st StartupStats
	var errs []error
	// The pass reads every job.json, which takes seconds per 100k jobs:
	// meanwhile the lock checks run every Interval, so that a holder
	// that dies now is recovered as fast as ever. The locks are learned
	// first (incoming/ is listed first).
	lastTick := time.Now()
	tickNow := func() {
		if time.Since(lastTick) < w.cfg.Interval {
			return
		}
		if err := w.tick(ctx); err != nil {
			w.log.Error().Err(err).Msg("check incomplete")
		}
		lastTick = time.Now()
	}
	for _, state := range job.States {
		if ctx.Err() != nil {
			break
		}
		if state == job.InProgress {
			agents, err := fsq.ScanDir(w.spool.StateDir(job.InProgress))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			st.Hostile += len(agents.Hostile)
			for _, agent := range agents.Dirs {
				ents, err := fsq.ScanDir(w.spool.AgentDir(agent))
				if err != nil {
					errs = append(errs, err)
					continue
				}
				st.Hostile += len(ents.Hostile)
				for _, id := range ents.Dirs {
					if ctx.Err() != nil {
						break
					}
					w.startupCheck(&st, state, agent, id)
					tickNow()
				}
			}
			continue
		}
		ents, err := fsq.ScanDir(w.spool.StateDir(state))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		st.Hostile += len(ents.Hostile)
		if state == job.Queued {
			for _, id := range ents.Dirs {
				if lid, ok := strings.CutSuffix(id, job.LockSuffix); ok {
					w.locks[lid] = true
				}
			}
		}
		for _, id := range ents.Dirs {
			if ctx.Err() != nil {
				break
			}
			if state == job.Queued && strings.HasSuffix(id, job.LockSuffix) {
				continue
			}
			w.startupCheck(&st, state, "", id)
			tickNow()
		}
	}
	w.sweepTemps(&st, w.spool.Path(job.CorruptDir), func(t string) bool {
		return strings.HasSuffix(t, ".quarantine.json")
	})
	ev := w.log.Info()
	if st.Reconciled+st.Quarantined+st.Failed+st.Schema+st.Hostile > 0 {
		ev = w.log.Warn()
	}
	ev.Int("jobs", st.Jobs).Int("consistent", st.Consistent).Int("reconciled", st.Reconciled).
		Int("quarantined", st.Quarantined).Int("busy", st.Busy).Int("schema_mismatch", st.Schema).
		Int("hostile", st.Hostile).Int("failed", st.Failed).Int("temps_removed", st.Temps).
		Int64("duration_ms", time.Since(start).Milliseconds()).
		Msg("startup reconcile done")
	return errors.Join(errs...)
}

func (w *Watchdog) startupCheck(st *StartupStats, state job.State, agent, id string) {
	if job.ValidateID(id) != nil {
		st.Hostile++
		return
	}
	w.sweepTemps(st, w.spool.JobDir(state, agent, id), func(t string) bool {
		return t == job.JobFile || t == job.ControlFile
	})
	j, err := job.ReadJob(w.spool.JobDir(state, agent, id))
	var why string
	switch {
	case errors.Is(err, fsq.ErrVanished):
		return // moved meanwhile by its holder
	case errors.Is(err, job.ErrSchema):
		st.Jobs++
		st.Schema++
		w.log.Error().Err(err).Str("job_id", id).Msg("unknown schema version; job left in place")
		return
	case err != nil:
		st.Jobs++
		why = "startup reconcile: unreadable job.json"
	case j.Status == state:
		st.Jobs++
		st.Consistent++
		return
	default:
		st.Jobs++
		why = fmt.Sprintf("startup reconcile: status %s found in %s/", j.Status, state.Dir())
	}
	out, rerr := w.spool.Reconcile(id, Actor, why)
	switch {
	case errors.Is(rerr, fsq.ErrLocked):
		st.Busy++
		return
	case rerr != nil:
		st.Failed++
	case out.Action == "quarantined":
		st.Quarantined++
	default:
		st.Reconciled++
	}
	w.logOutcome(out, "startup", why, rerr)
}

// sweepTemps removes from dir the temp files of atomic writes (of the
// files target accepts) whose writer died before renaming them: a power
// cut or a kill leaves them, and nothing else ever would. A temp file
// younger than LockGrace may belong to a live writer and is left alone.
func (w *Watchdog) sweepTemps(st *StartupStats, dir string, target func(string) bool) {
	n, err := fsq.SweepTemps(dir, w.cfg.LockGrace, target)
	st.Temps += n
	if err != nil {
		w.log.Error().Err(err).Msg("cannot remove leftover temp files")
	}
}
