package watchdog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
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

// startupPass is the startup reconcile, made in two parts. The first,
// in-progress/ (running jobs only: at most agents x slots), is made at
// once, before the recovery loop starts. The rest, every other state
// directory (the whole queue and every finished job), is made in steps
// of at most Config.StartupChunk jobs between the loop's checks, so that
// the recovery of a dead holder never waits for it.
//
// Why the order is safe: a recovery (RecoverJudgedLock, or Reconcile of
// a lockless in-progress job) acts on one job under its lock and reads
// that job's own job.json and place; it never relies on another job
// having been reconciled. What the startup pass repairs outside
// in-progress/ is a job whose status disagrees with its directory (an
// operator's retry, a move or a quarantine cut short); nothing runs such
// a job meanwhile, because every transaction re-reads job.json under the
// lock and refuses a status it does not expect (a claim takes only a
// queued job; managerd's moves check the state they expect and reconcile
// a mismatch themselves). The part that recovery does depend on, the
// status of running jobs (a commit cut short by a power cut leaves its
// outcome in in-progress/, perhaps without a lock), is in the first
// part, so it happens before any recovery, as before.
type startupPass struct {
	st     StartupStats
	errs   []error
	start  time.Time
	states []job.State             // state directories still to reconcile, in order
	cur    *spoolstore.StateCursor // over states[0]
	done   bool                    // the summary line was logged
}

// Startup is the full reconcile pass made when the watchdog starts: it
// reads every job.json of every state directory once and reconciles each
// job whose status disagrees with its directory, which rolls forward or
// back the transactions a crash or power cut interrupted. Jobs whose lock
// is held are left to the lock checks. It also learns the locks of
// incoming/. It logs one summary line. Run makes the same pass in steps
// (in-progress/ first, the rest between its checks); Startup makes all of
// it now, checking the locks every Interval meanwhile.
func (w *Watchdog) Startup(ctx context.Context) error {
	w.startupFirst(ctx)
	lastTick := time.Now()
	for w.startupStep(ctx) {
		if time.Since(lastTick) >= w.cfg.Interval {
			if err := w.tick(ctx); err != nil {
				w.log.Error().Err(err).Msg("check incomplete")
			}
			lastTick = time.Now()
		}
	}
	return errors.Join(w.pass.errs...)
}

// startupFirst makes the first part of the startup reconcile: every job
// of in-progress/, whose locks it learns, so that the first check judges
// their holders.
func (w *Watchdog) startupFirst(ctx context.Context) {
	p := &startupPass{start: time.Now()}
	w.pass = p
	for _, st := range job.States {
		if st != job.InProgress {
			p.states = append(p.states, st)
		}
	}
	agents, err := w.jobs.StateNames(job.InProgress)
	if err != nil {
		p.errs = append(p.errs, err)
		return
	}
	p.st.Hostile += len(agents.Hostile)
	for _, agent := range agents.Dirs {
		ents, err := w.jobs.AgentNames(agent)
		if err != nil {
			p.errs = append(p.errs, err)
			continue
		}
		p.st.Hostile += len(ents.Hostile)
		for _, id := range ents.Dirs {
			if ctx.Err() != nil {
				return
			}
			w.startupCheck(&p.st, job.InProgress, agent, id)
			if job.ValidateID(id) != nil {
				continue
			}
			if _, err := w.jobs.StatLock(id); err == nil {
				w.locks[id] = true
			}
		}
	}
}

// startupPending reports whether the startup reconcile has steps left.
func (w *Watchdog) startupPending() bool { return w.pass != nil && !w.pass.done }

// startupStep reconciles up to Config.StartupChunk more jobs of the
// directories after in-progress/ (learning the locks of incoming/ on
// the way) and reports whether steps are left. The step that finishes
// the pass logs its summary line.
func (w *Watchdog) startupStep(ctx context.Context) bool {
	p := w.pass
	if p == nil || p.done {
		return false
	}
	if len(p.states) > 0 && ctx.Err() == nil {
		state := p.states[0]
		if p.cur == nil {
			p.cur = w.jobs.StateCursor(state)
		}
		ents, end, err := p.cur.Next(w.cfg.StartupChunk)
		if err != nil {
			p.errs = append(p.errs, err)
		}
		p.st.Hostile += len(ents.Hostile)
		for _, id := range ents.Dirs {
			if ctx.Err() != nil {
				break
			}
			if state == job.Queued {
				if lid, ok := strings.CutSuffix(id, job.LockSuffix); ok {
					w.locks[lid] = true
					continue
				}
			}
			w.startupCheck(&p.st, state, "", id)
		}
		if end {
			p.cur = nil
			p.states = p.states[1:]
		}
		if len(p.states) > 0 && ctx.Err() == nil {
			return true
		}
	}
	if p.cur != nil {
		p.cur.Close()
		p.cur = nil
	}
	w.sweepTemps(&p.st, func() (int, error) { return w.jobs.SweepQuarantineNoteTemps(w.cfg.LockGrace) })
	st := p.st
	ev := w.log.Info()
	if st.Reconciled+st.Quarantined+st.Failed+st.Schema+st.Hostile > 0 {
		ev = w.log.Warn()
	}
	ev.Int("jobs", st.Jobs).Int("consistent", st.Consistent).Int("reconciled", st.Reconciled).
		Int("quarantined", st.Quarantined).Int("busy", st.Busy).Int("schema_mismatch", st.Schema).
		Int("hostile", st.Hostile).Int("failed", st.Failed).Int("temps_removed", st.Temps).
		Int64("duration_ms", time.Since(p.start).Milliseconds()).
		Msg("startup reconcile done")
	p.done = true
	return false
}

func (w *Watchdog) startupCheck(st *StartupStats, state job.State, agent, id string) {
	if w.onStartupCheck != nil {
		w.onStartupCheck(state, id)
	}
	if job.ValidateID(id) != nil {
		st.Hostile++
		return
	}
	w.sweepTemps(st, func() (int, error) { return w.jobs.SweepJobTemps(state, agent, id, w.cfg.LockGrace) })
	j, err := w.read(state, agent, id)
	var why string
	switch {
	case errors.Is(err, job.ErrNotFound):
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
	out, rerr := w.jobs.Reconcile(id, Actor, why)
	switch {
	case errors.Is(rerr, store.ErrBusy):
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

// read reads job id's job.json in state's directory (in-progress/ under
// agent) without its lock: a job gone meanwhile is job.ErrNotFound.
func (w *Watchdog) read(state job.State, agent, id string) (*job.Job, error) {
	if state == job.InProgress {
		return w.jobs.ReadRunning(agent, id)
	}
	return w.jobs.ReadIn(state, id)
}

// sweepTemps counts and logs a sweep (sweep) of the temp files of atomic
// writes whose writer died before renaming them: a power cut or a kill
// leaves them, and nothing else ever would. The sweeps pass LockGrace: a
// temp file younger than that may belong to a live writer and is left
// alone.
func (w *Watchdog) sweepTemps(st *StartupStats, sweep func() (int, error)) {
	n, err := sweep()
	st.Temps += n
	if err != nil {
		w.log.Error().Err(err).Msg("cannot remove leftover temp files")
	}
}
