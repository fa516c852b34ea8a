// Package watchdog is watchdogd's recovery engine. Every Interval it checks
// each claim lock incoming/<id>.lock it knows of, and recovers the job of
// every lock whose holder is
//
//   - dead: the lock has no readable owner file and is older than
//     LockGrace, or proc.Check proves the owner process gone (pid gone,
//     pid reused, other boot, zombie); or
//   - silent: the owner looks alive but the job it holds in
//     in-progress/<agent>/<id> has a last_heartbeat (or started_at) older
//     than CrashThreshold.
//
// Recovery is job.Spool.RecoverLock: the half-done transaction is rolled
// forward or back, an abandoned in-progress job goes to stale/ (managerd
// decides what happens next), and the lock is removed.
//
// The set of locks is kept from fsnotify events on incoming/ plus full
// relistings every Rescan, so that incoming/ (which holds the whole queue)
// is not read every Interval. Every Interval the watchdog also lists
// in-progress/*/ (only running jobs) for jobs that have no lock at all,
// which it reconciles once they are older than LockGrace.
//
// At startup (the first RunOnce) it makes one full reconcile pass over
// every state directory, reading each job.json once and reconciling every
// job whose status disagrees with its directory: that is what repairs a
// spool after a power cut.
package watchdog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// Actor is the name watchdogd writes into events and lock owner files.
const Actor = "watchdogd"

// Verdicts logged with each recovery besides proc's (pid gone, ...).
const (
	VerdictNoOwner  = "no owner file"
	VerdictBadOwner = "unreadable owner file"
	VerdictSilent   = "silent"
	VerdictNoLock   = "no lock"
)

// Config tunes the watchdog. Zero fields take the defaults below.
type Config struct {
	Interval       time.Duration // period of lock checks (default 500ms)
	CrashThreshold time.Duration // heartbeat age that makes an owner silent (default 30s)
	LockGrace      time.Duration // age before a lock without owner, or a job without lock, is recovered (default 5s)
	Rescan         time.Duration // period of full relistings of incoming/ (default 10s)
	NoNotify       bool          // rely on rescans only (no fsnotify)
	// Ready is called once, after Run's first full pass.
	Ready func()
}

func (c *Config) defaults() {
	if c.Interval <= 0 {
		c.Interval = 500 * time.Millisecond
	}
	if c.CrashThreshold <= 0 {
		c.CrashThreshold = 30 * time.Second
	}
	if c.LockGrace <= 0 {
		c.LockGrace = 5 * time.Second
	}
	if c.Rescan <= 0 {
		c.Rescan = 10 * time.Second
	}
}

// Watchdog recovers the jobs of dead and silent lock holders in one spool.
// Its methods are not safe for concurrent use, except Alive.
type Watchdog struct {
	spool *job.Spool
	cfg   Config
	log   zerolog.Logger

	locks   map[string]bool      // ids whose lock incoming/<id>.lock exists
	quiet   map[string]time.Time // ids whose recovery failed: not retried before
	started bool
	active  atomic.Int64 // unix nanoseconds of the last loop activity
}

// New returns a watchdog for spool s.
func New(s *job.Spool, cfg Config, log zerolog.Logger) *Watchdog {
	cfg.defaults()
	w := &Watchdog{spool: s, cfg: cfg, log: log, locks: map[string]bool{}, quiet: map[string]time.Time{}}
	w.touch()
	return w
}

func (w *Watchdog) touch() { w.active.Store(time.Now().UnixNano()) }

// Alive reports whether the loop has made progress recently; systemd's
// watchdog pings stop when it does not.
func (w *Watchdog) Alive() bool {
	limit := max(20*w.cfg.Interval, 30*time.Second)
	return time.Since(time.Unix(0, w.active.Load())) < limit
}

// RunOnce is one full pass: the startup reconcile (first call only), a
// relisting of the locks in incoming/, and one check of every lock and of
// in-progress/. The error reports directories that could not be scanned.
func (w *Watchdog) RunOnce(ctx context.Context) error {
	w.touch()
	var errs []error
	if !w.started {
		w.started = true
		if err := w.Startup(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := w.rescanLocks(); err != nil {
		errs = append(errs, err)
	}
	if err := w.tick(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run checks the locks every Interval until ctx is done, keeping the set
// of locks from watch events on incoming/ and relisting it on every
// rescan. The first rescan runs RunOnce (with the startup reconcile).
func (w *Watchdog) Run(ctx context.Context) error {
	incoming := w.spool.StateDir(job.Queued)
	wcfg := fsq.WatchConfig{Dirs: []string{incoming}, Rescan: w.cfg.Rescan, NoNotify: w.cfg.NoNotify}
	wcfg.OnFallback = func(err error) {
		w.log.Warn().Err(err).Msg("fsnotify unavailable; relying on periodic rescans")
	}
	watch := fsq.StartWatch(ctx, wcfg)
	defer watch.Stop()

	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	ready := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-watch.Events:
			w.touch()
			switch {
			case ev.Rescan && !ready:
				if err := w.RunOnce(ctx); err != nil {
					w.log.Error().Err(err).Msg("pass incomplete")
				}
				ready = true
				w.log.Info().Int("locks", len(w.locks)).Msg("first pass done; ready")
				if w.cfg.Ready != nil {
					w.cfg.Ready()
				}
			case ev.Rescan:
				if err := w.rescanLocks(); err != nil {
					w.log.Error().Err(err).Msg("rescan failed")
				}
			case ev.Dir == incoming && strings.HasSuffix(ev.Name, job.LockSuffix):
				id := strings.TrimSuffix(ev.Name, job.LockSuffix)
				if ev.Created {
					w.locks[id] = true
				} else if ev.Removed {
					delete(w.locks, id)
					delete(w.quiet, id)
				}
			}
		case <-tick.C:
			w.touch()
			if !ready {
				continue // the first pass comes first
			}
			if err := w.tick(ctx); err != nil {
				w.log.Error().Err(err).Msg("check incomplete")
			}
		}
	}
}

// rescanLocks relists incoming/ and replaces the set of known locks.
func (w *Watchdog) rescanLocks() error {
	ents, err := fsq.ScanDir(w.spool.StateDir(job.Queued))
	if err != nil {
		return err
	}
	locks := map[string]bool{}
	for _, name := range append(ents.Dirs, ents.Hostile...) {
		if strings.HasSuffix(name, job.LockSuffix) {
			locks[strings.TrimSuffix(name, job.LockSuffix)] = true
		}
	}
	w.locks = locks
	now := time.Now()
	for id, until := range w.quiet {
		if now.After(until) {
			delete(w.quiet, id)
		}
	}
	return nil
}

// tick checks every known lock, then in-progress/ for jobs without one.
func (w *Watchdog) tick(ctx context.Context) error {
	now := time.Now()
	for id := range w.locks {
		if ctx.Err() != nil {
			return nil
		}
		w.checkLock(id, now)
	}
	return w.scanInProgress(ctx, now)
}

func (w *Watchdog) quieted(id string, now time.Time) bool {
	until, ok := w.quiet[id]
	return ok && now.Before(until)
}

// checkLock judges the holder of incoming/<id>.lock and recovers its job
// when the holder is dead or silent.
func (w *Watchdog) checkLock(id string, now time.Time) {
	if w.quieted(id, now) {
		return
	}
	lock := w.spool.LockPath(id)
	fi, err := os.Lstat(lock)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			delete(w.locks, id)
		} else {
			w.log.Error().Err(err).Str("job_id", id).Msg("cannot stat lock")
		}
		return
	}
	if !fi.IsDir() {
		w.quarantineLock(id, lock)
		return
	}
	var owner job.Owner
	raw, readErr := fsq.ReadOwner(lock)
	rerr := readErr
	if rerr == nil {
		owner, rerr = job.ParseOwner(raw)
	}
	var verdict, reason string
	switch {
	case rerr != nil:
		age := now.Sub(fi.ModTime())
		if age < w.cfg.LockGrace {
			return // being created: mkdir comes before the owner file
		}
		if errors.Is(rerr, fs.ErrNotExist) {
			verdict = VerdictNoOwner
			reason = fmt.Sprintf("owner died: lock has no owner file after %s", round(age))
		} else {
			verdict = VerdictBadOwner
			reason = fmt.Sprintf("owner died: owner file unreadable after %s: %v", round(age), rerr)
		}
	default:
		v := proc.Check(owner.Identity)
		if v.Dead() {
			verdict = v.String()
			reason = fmt.Sprintf("owner died: %s (%s pid %d)", v, owner.Actor, owner.PID)
			break
		}
		silence, ok := w.silence(id, owner.Agent, now)
		if !ok || silence <= w.cfg.CrashThreshold {
			return
		}
		verdict = VerdictSilent
		reason = fmt.Sprintf("owner silent: no heartbeat for %s (%s pid %d)", round(silence), owner.Actor, owner.PID)
	}
	if verdict != VerdictSilent && !w.handlerGone(id, lock) {
		return // checked again next interval
	}
	// The lock may have changed hands while it was judged: act only if it
	// still holds what was judged.
	// Compare what was read, not whether it parsed: an owner file that a
	// power cut left empty or torn reads fine and never parses.
	cur, cerr := fsq.ReadOwner(lock)
	if (readErr == nil) != (cerr == nil) || (readErr == nil && !bytes.Equal(cur, raw)) {
		return
	}
	judged := raw
	if judged == nil {
		judged = []byte{} // judged without a readable owner file
	}
	out, err := w.spool.RecoverJudgedLock(id, Actor, reason, judged)
	w.logOutcome(out, verdict, reason, err)
	if err != nil {
		w.quiet[id] = now.Add(w.cfg.Rescan)
		return
	}
	delete(w.locks, id)
}

// handlerGone makes sure that no execution a dead holder started for job
// id is still running before the job is recovered (and run again): the
// parent-death signal reaches the handler a moment after its agent died,
// and never reaches the processes the handler started. It looks for the
// process group recorded in the lock (job.HandlerFile) and for any process
// whose environment names the job's directory in this spool
// (job.EnvJobDir: set for every execution, inherited by what it starts; it
// also finds a handler whose agent died before recording it). No live
// holder can be running the job meanwhile: its dead owner's lock is still
// there. What it finds is sent SIGKILL (what agentd would have done) and
// the recovery waits for the next check; when that cannot be checked or
// done, the recovery waits too: a job is never run twice at once.
func (w *Watchdog) handlerGone(id, lock string) bool {
	l := w.log.With().Str("job_id", id).Logger()
	gone := true
	if h, err := job.ReadHandler(lock); err == nil {
		alive, gerr := proc.GroupAlive(h)
		switch {
		case alive && gerr != nil:
			l.Error().Err(gerr).Int("handler_pgid", h.PID).Msg("cannot tell whether the dead holder's handler still runs; recovery waits")
			return false
		case alive:
			gone = false
			if err := syscall.Kill(-h.PID, syscall.SIGKILL); err != nil {
				l.Error().Err(err).Int("handler_pgid", h.PID).Msg("the dead holder's handler still runs and cannot be killed; recovery waits")
				return false
			}
			l.Warn().Int("handler_pgid", h.PID).Msg("the dead holder's handler still ran: its process group was killed; recovery follows once it is gone")
		}
	}
	pids, err := proc.WithEnv(func(kv []byte) bool { return w.spool.IsExecutionEnv(kv, id) })
	if err != nil {
		l.Error().Err(err).Msg("cannot look for the dead holder's handler processes; recovery waits")
		return false
	}
	for _, pid := range pids {
		gone = false
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			l.Error().Err(err).Int("pid", pid).Msg("a process of the dead holder's execution cannot be killed; recovery waits")
			continue
		}
		l.Warn().Int("pid", pid).Msg("a process of the dead holder's execution still ran: killed; recovery follows once it is gone")
	}
	return gone
}

// silence returns how long the in-progress job id of agent has not
// heartbeated. ok is false when there is no such running job (the claim
// has not reached in-progress yet, or a commit is under way).
func (w *Watchdog) silence(id, agent string, now time.Time) (time.Duration, bool) {
	if agent == "" || job.ValidateID(agent) != nil {
		return 0, false
	}
	j, err := job.ReadJob(w.spool.JobDir(job.InProgress, agent, id))
	if err != nil || j.Status != job.InProgress {
		return 0, false
	}
	last := j.LastHeartbeat
	if last == nil {
		last = j.StartedAt
	}
	if last == nil {
		return 0, false
	}
	return now.Sub(*last), true
}

// quarantineLock moves a non-directory planted as a lock (a symlink or a
// file) out of the way into corrupt/; no holder ever makes one.
func (w *Watchdog) quarantineLock(id, lock string) {
	l := w.log.With().Str("job_id", id).Logger()
	q, err := w.spool.Quarantine(lock, "not a directory where a claim lock must be")
	if err != nil {
		if !errors.Is(err, fsq.ErrVanished) {
			l.Error().Err(err).Msg("cannot quarantine hostile lock")
			w.quiet[id] = time.Now().Add(w.cfg.Rescan)
		}
		return
	}
	delete(w.locks, id)
	l.Error().Str("path", q).Msg("hostile lock quarantined")
}

// scanInProgress reconciles running jobs that have no lock (their holder
// lost it, e.g. a power cut between the rename and the lock), once their
// directory is older than LockGrace. It also learns locks whose creation
// event was missed.
func (w *Watchdog) scanInProgress(ctx context.Context, now time.Time) error {
	agents, err := fsq.ScanDir(w.spool.StateDir(job.InProgress))
	if err != nil {
		return err
	}
	var errs []error
	for _, agent := range agents.Dirs {
		ents, err := fsq.ScanDir(w.spool.AgentDir(agent))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range ents.Dirs {
			if ctx.Err() != nil {
				return errors.Join(errs...)
			}
			if job.ValidateID(id) != nil || w.quieted(id, now) {
				continue // not a job name: farroctl fsck reports it
			}
			if _, err := os.Lstat(w.spool.LockPath(id)); err == nil {
				w.locks[id] = true
				continue
			} else if !errors.Is(err, fs.ErrNotExist) {
				continue
			}
			fi, err := os.Lstat(w.spool.JobDir(job.InProgress, agent, id))
			if err != nil {
				continue
			}
			if age := now.Sub(fi.ModTime()); age < w.cfg.LockGrace {
				continue
			}
			reason := fmt.Sprintf("owner died: in-progress job has no lock (agent %s)", agent)
			out, err := w.spool.Reconcile(id, Actor, reason)
			w.logOutcome(out, VerdictNoLock, reason, err)
			if err != nil && !errors.Is(err, fsq.ErrLocked) {
				w.quiet[id] = now.Add(w.cfg.Rescan)
			}
		}
	}
	return errors.Join(errs...)
}

// logOutcome logs a recovery once: a state_transition line when the job
// moved, a warning when only a lock was removed, an error on failure.
func (w *Watchdog) logOutcome(out job.Outcome, verdict, reason string, err error) {
	// logx.Transition adds job_id itself: the other lines add it here.
	base := w.log.With().Str("verdict", verdict).Logger()
	l := base.With().Str("job_id", out.ID).Logger()
	counted(out, verdict, err)
	if err != nil {
		if errors.Is(err, fsq.ErrLocked) || errors.Is(err, fsq.ErrVanished) {
			l.Debug().Err(err).Msg("job taken by someone else meanwhile")
			return
		}
		l.Error().Err(err).Str("cause", reason).Msg("recovery failed")
		return
	}
	base = base.With().Str("action", out.Action).Logger()
	l = l.With().Str("action", out.Action).Logger()
	switch {
	case out.Action == "quarantined":
		l.Error().Str("cause", reason).Str("path", out.Detail).Msg("corrupt job quarantined")
	case out.From != "" && out.To != "":
		j, rerr := job.ReadJob(w.spool.JobDir(out.To, "", out.ID))
		if rerr != nil { // already moved on (managerd is fast): log what we know
			j = &job.Job{ID: out.ID, Status: out.To, Reason: reason}
		}
		logx.Transition(base.With().Str("cause", reason).Logger(), j, out.From)
	default:
		ev := l.Warn().Str("cause", reason)
		if out.Detail != "" {
			ev = ev.Str("detail", out.Detail)
		}
		ev.Msg("lock of a dead holder removed")
	}
}

func round(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}
