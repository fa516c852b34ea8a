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
// The spool is reached only through the spool store (*spoolstore.Store):
// its watch, cursors and listings of the state directories, and the
// spool's own operations on claim locks and running jobs. Recovery is
// its RecoverJudgedLock (job.Spool.RecoverJudgedLock): the half-done transaction is rolled
// forward or back, an abandoned in-progress job goes to stale/ (managerd
// decides what happens next), and the lock is removed.
//
// The set of locks is kept from fsnotify events on incoming/ plus full
// relistings every Rescan, so that incoming/ (which holds the whole queue)
// is not read every Interval. Every Interval the watchdog also lists
// in-progress/*/ (only running jobs) for jobs that have no lock at all,
// which it reconciles once they are older than LockGrace.
//
// At startup it makes one full reconcile pass over every state
// directory, reading each job.json once and reconciling every job whose
// status disagrees with its directory: that is what repairs a spool after
// a power cut. Run makes in-progress/ (running jobs only) first, checks
// the locks and is ready; the rest of the pass (the queue and the
// finished jobs) goes on in steps of StartupChunk jobs between the
// checks, so that recovery never waits for it (see startupPass).
//
// After the startup, incoming/ is relisted for locks ListChunk names per
// Rescan (a lap over a large queue spans several rescans): the set is
// kept by watch events, the locks of running jobs are learned from
// in-progress/ every Interval, and a lock that is gone is forgotten when
// it is checked, so the relisting only finds what a lost event hid.
// Without fsnotify (NoNotify) every Rescan starts a whole lap, made in
// steps between the checks.
package watchdog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/metrics"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// Actor is the name watchdogd writes into events and lock owner files.
const Actor = "watchdogd"

// Verdicts logged with each recovery besides proc's (pid gone, ...).
const (
	VerdictNoOwner  = job.VerdictNoOwner
	VerdictBadOwner = job.VerdictBadOwner
	VerdictSilent   = job.VerdictSilent
	VerdictNoLock   = job.VerdictNoLock
)

// Config tunes the watchdog. Zero fields take the defaults below.
type Config struct {
	Interval       time.Duration // period of lock checks (default 500ms)
	CrashThreshold time.Duration // heartbeat age that makes an owner silent (default 30s)
	LockGrace      time.Duration // age before a lock without owner, or a job without lock, is recovered (default 5s)
	Rescan         time.Duration // period of relistings of incoming/ (default 10s)
	NoNotify       bool          // rely on rescans only (no fsnotify)
	// StartupChunk is how many jobs one step of the startup reconcile
	// reads between two looks at the loop's events (default 256).
	StartupChunk int
	// ListChunk is how many names of incoming/ one Rescan relists for
	// locks, and one step of a lap reads (default 16384).
	ListChunk int
	// Ready is called once, after Run's first check (in-progress/
	// reconciled, every known lock judged); the rest of the startup
	// reconcile goes on after it.
	Ready func()
	// Now is the watchdog's clock (default time.Now). Silence and the
	// grace periods are measured only as durations between two of its
	// readings (time.Now's are monotonic), never by comparing a
	// timestamp written into the spool with it: a step of the wall clock
	// neither requeues running jobs nor hides a silent one. Tests pass a
	// clock they advance.
	Now func() time.Time
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
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.StartupChunk <= 0 {
		c.StartupChunk = 256
	}
	if c.ListChunk <= 0 {
		c.ListChunk = 16384
	}
}

// Watchdog recovers the jobs of dead and silent lock holders in one spool.
// Its methods are not safe for concurrent use, except Alive.
type Watchdog struct {
	jobs *spoolstore.Store // the only door to the spool's jobs
	cfg  Config
	log  zerolog.Logger

	locks map[string]bool      // ids whose lock incoming/<id>.lock exists
	quiet map[string]time.Time // ids whose recovery failed: not retried before
	// seen is what the watchdog last observed of each lock (and of each
	// lockless in-progress job), and since when on its own clock: a
	// holder is silent when what it must keep changing (its heartbeat)
	// has not changed for CrashThreshold of the watchdog's time.
	seen    map[string]observation
	waiting map[string]bool // ids whose recovery waits for an execution to end (logged once)
	started bool
	pass    *startupPass            // the startup reconcile, while steps of it are left
	lockCur *spoolstore.StateCursor // relisting of incoming/ for locks
	lockLap bool                    // a lap of lockCur runs in steps between checks
	active  atomic.Int64            // unix nanoseconds of the last loop activity

	onStartupCheck func(state job.State, id string) // tests: before the startup pass reads a job
}

// New returns a watchdog for the spool behind store s.
func New(s *spoolstore.Store, cfg Config, log zerolog.Logger) *Watchdog {
	cfg.defaults()
	w := &Watchdog{jobs: s, cfg: cfg, log: log, locks: map[string]bool{}, quiet: map[string]time.Time{},
		seen: map[string]observation{}, waiting: map[string]bool{},
		lockCur: s.StateCursor(job.Queued)}
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

// RunOnce is one full pass: a relisting of the locks in incoming/ and
// one check of every lock and of in-progress/; the first call makes the
// startup reconcile's first part (in-progress/) before the check and
// all the rest after it. The error reports directories that could not be
// scanned.
func (w *Watchdog) RunOnce(ctx context.Context) error {
	w.touch()
	var errs []error
	first := !w.started
	if first {
		w.started = true
		w.startupFirst(ctx)
	}
	if err := w.rescanLocks(); err != nil {
		errs = append(errs, err)
	}
	if err := w.tick(ctx); err != nil {
		errs = append(errs, err)
	}
	if first {
		lastTick := time.Now()
		for w.startupStep(ctx) {
			if time.Since(lastTick) >= w.cfg.Interval {
				if err := w.tick(ctx); err != nil {
					w.log.Error().Err(err).Msg("check incomplete")
				}
				lastTick = time.Now()
			}
		}
		errs = append(errs, w.pass.errs...)
		if err := w.tick(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// EventCoalesce is how long the watchdog lets directory events gather
// before it reads them (spoolstore.StateWatchConfig.Coalesce): under a busy queue it
// wakes about 50 times a second instead of once per lock made or removed.
const EventCoalesce = 20 * time.Millisecond

// Run checks the locks every Interval until ctx is done, keeping the set
// of locks from watch events on incoming/ and relisting it on rescans.
// The first rescan makes the startup reconcile's first part
// (in-progress/) and the first check, and the watchdog is ready; the
// rest of the startup reconcile and the first lap over incoming/'s locks
// go on in steps between the checks and events.
func (w *Watchdog) Run(ctx context.Context) error {
	// Lock churn is read in batches: every claim and commit makes and
	// removes a lock, and the set of locks is only used on ticks.
	wcfg := spoolstore.StateWatchConfig{States: []job.State{job.Queued}, Rescan: w.cfg.Rescan, NoNotify: w.cfg.NoNotify, Coalesce: EventCoalesce}
	wcfg.OnFallback = func(err error) {
		w.log.Warn().Err(err).Msg("fsnotify unavailable; relying on periodic rescans")
	}
	watch := w.jobs.WatchStates(ctx, wcfg)
	defer watch.Stop()

	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	defer w.lockCur.Close()
	ready := false
	for {
		if err := w.jobs.DurabilityErr(); err != nil {
			return durabilityLost(w.log, err)
		}
		var more <-chan time.Time // ready at once while background steps are left
		if ready && (w.lockLap || w.startupPending()) {
			more = alwaysReady
		}
		select {
		case <-ctx.Done():
			return nil
		case <-more:
			w.touch()
			w.background(ctx)
		case ev := <-watch.Events:
			w.touch()
			switch {
			case ev.Rescan && !ready:
				w.started = true
				w.startupFirst(ctx)
				if err := w.tick(ctx); err != nil {
					w.log.Error().Err(err).Msg("check incomplete")
				}
				ready = true
				w.lockLap = true
				w.log.Info().Int("locks", len(w.locks)).Msg("first pass done; ready")
				if w.cfg.Ready != nil {
					w.cfg.Ready()
				}
			case ev.Rescan:
				w.pruneQuiet()
				switch {
				case w.lockLap:
				case w.cfg.NoNotify:
					w.lockLap = true // no events: every rescan is a whole lap
				default:
					w.relistLocks(w.cfg.ListChunk)
				}
			case watch.State(ev) == job.Queued && strings.HasSuffix(ev.Name, job.LockSuffix):
				id := strings.TrimSuffix(ev.Name, job.LockSuffix)
				if ev.Created {
					w.locks[id] = true
				} else if ev.Removed {
					w.forget(id)
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

// alwaysReady is a channel that is always ready: the loop's select takes
// it among whatever else is ready (select picks at random), so a check or
// an event waits for one background step at most.
var alwaysReady = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// background makes one step of what runs between the checks: the lap
// over incoming/'s locks first (names only), then the startup reconcile.
func (w *Watchdog) background(ctx context.Context) {
	if w.lockLap {
		w.relistLocks(w.cfg.ListChunk)
		return
	}
	if !w.startupStep(ctx) && len(w.pass.errs) > 0 {
		w.log.Error().Err(errors.Join(w.pass.errs...)).Msg("pass incomplete")
	}
}

// relistLocks reads up to n more names of incoming/ and adds the locks
// among them to the known set. A lap's end forgets what was seen of
// locks no longer known (a lock that is gone is forgotten when checked).
func (w *Watchdog) relistLocks(n int) {
	ents, end, err := w.lockCur.Next(n)
	if err != nil {
		w.log.Error().Err(err).Msg("rescan failed")
	}
	for _, list := range [][]string{ents.Dirs, ents.Hostile} {
		for _, name := range list {
			if id, ok := strings.CutSuffix(name, job.LockSuffix); ok {
				w.locks[id] = true
			}
		}
	}
	if end {
		w.lockLap = false
		w.pruneSeen()
	}
}

// pruneQuiet forgets the recoveries whose pause has ended.
func (w *Watchdog) pruneQuiet() {
	now := w.cfg.Now()
	for id, until := range w.quiet {
		if now.After(until) {
			delete(w.quiet, id)
		}
	}
}

// pruneSeen forgets what was seen of locks no longer known.
func (w *Watchdog) pruneSeen() {
	for key := range w.seen {
		if id, ok := strings.CutPrefix(key, "lock/"); ok && !w.locks[id] {
			delete(w.seen, key)
			delete(w.waiting, id)
		}
	}
}

// rescanLocks relists the whole of incoming/ and replaces the set of
// known locks (RunOnce; Run relists in steps).
func (w *Watchdog) rescanLocks() error {
	ents, err := w.jobs.StateNames(job.Queued)
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
	w.pruneQuiet()
	w.pruneSeen()
	return nil
}

// forget drops what the watchdog knew of id's lock (it is gone).
func (w *Watchdog) forget(id string) {
	delete(w.locks, id)
	delete(w.quiet, id)
	delete(w.seen, "lock/"+id)
	delete(w.waiting, id)
}

// observation is what was seen of a lock or job, and since when (the
// watchdog's clock).
type observation struct {
	what  string
	since time.Time
}

// unchanged records what is seen under key now and returns how long,
// on the watchdog's clock, it has been the same. The first sighting
// counts as a change: a watchdog that just started waits a full period
// before it judges anything silent.
func (w *Watchdog) unchanged(key, what string, now time.Time) time.Duration {
	o, ok := w.seen[key]
	if !ok || o.what != what {
		w.seen[key] = observation{what: what, since: now}
		return 0
	}
	return now.Sub(o.since)
}

// tick checks every known lock, then in-progress/ for jobs without one.
func (w *Watchdog) tick(ctx context.Context) error {
	now := w.cfg.Now()
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
	fi, err := w.jobs.StatLock(id)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			w.forget(id)
		} else {
			w.log.Error().Err(err).Str("job_id", id).Msg("cannot stat lock")
		}
		return
	}
	if !fi.IsDir() {
		w.quarantineLock(id)
		return
	}
	h := w.jobs.LockHolder(id)
	var unreadableFor time.Duration
	if h.Err != nil && !h.Foreign() {
		// How long the owner file has been missing or unreadable: seen
		// so on the watchdog's clock, or the lock's age by its mtime
		// (what a watchdog that just started, e.g. after a power cut,
		// has to go by). A forward wall-clock step can make a lock
		// being created look old; recovering it then only fails that
		// claim, whose owner write finds the lock gone.
		unreadableFor = max(w.unchanged("lock/"+id, "unreadable owner: "+errClass(h.ReadErr)+string(h.Raw), now), time.Since(fi.ModTime()))
	}
	// An owner file of another user (its holder maybe alive) proves
	// nothing: it is left alone (farroctl fsck reports it).
	judgement := job.JudgeHolder(h, unreadableFor, w.cfg.LockGrace)
	verdict, reason := judgement.Verdict, judgement.Reason
	switch {
	case judgement.Dead:
	case judgement.Live:
		silence, ok := w.silence(id, h.Raw, h.Owner, now)
		if !ok || silence <= w.cfg.CrashThreshold {
			return
		}
		verdict, reason = VerdictSilent, job.SilentReason(h, silence)
	default:
		return
	}
	// Whatever the verdict, the job leaves in-progress/ only once every
	// execution of it is gone: a silent holder's handler may well run.
	if !w.executionsGone(id) {
		return // checked again next interval
	}
	// The lock may have changed hands while it was judged: act only if it
	// still holds what was judged.
	if !w.jobs.HolderUnchanged(id, h) {
		return
	}
	judged := h.Judged()
	out, err := w.jobs.RecoverJudgedLock(id, Actor, reason, judged)
	w.logOutcome(out, verdict, reason, err)
	if err != nil {
		w.quiet[id] = now.Add(w.cfg.Rescan)
		return
	}
	w.forget(id)
}

// errClass names the kind of a read error, so that an owner file that
// stays unreadable for the same reason counts as unchanged.
func errClass(err error) string {
	if err == nil {
		return ""
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
}

// executionsGone stops whatever still runs of job id (job.StopExecutions)
// and reports whether it is proven gone. Until then the recovery waits,
// logged once per job and counted each time.
func (w *Watchdog) executionsGone(id string) bool {
	ex := w.jobs.StopExecutions(id)
	if !ex.Waiting {
		delete(w.waiting, id)
		return true
	}
	metrics.RecoveryWaited()
	l := w.log.With().Str("job_id", id).Logger()
	switch {
	case ex.Err != nil:
		l.Error().Err(ex.Err).Ints("killed", ex.Killed).Msg("cannot prove the holder's executions gone; recovery waits")
	case !w.waiting[id]:
		l.Warn().Ints("killed", ex.Killed).Msg("an execution of the job still ran: killed; recovery follows once it is gone")
	default:
		l.Error().Ints("killed", ex.Killed).Msg("an execution of the job survives SIGKILL (uninterruptible sleep?); the job stays where it is")
	}
	w.waiting[id] = true
	return false
}

// silence returns how long, on the watchdog's clock, the agent holding
// job id's lock (owner file raw) has shown no sign of life: its claim's
// job.json in in-progress/<agent>/<id> (heartbeat, status, claim) has not
// changed. A job that is not there at all under a live agent's lock (a
// recovery or a commit cut half-way, a claim frozen before its rename)
// counts as unchanged too, so nothing stays stranded behind a live owner.
// ok is false for locks held by others than agents (managerd, farroctl:
// they hold a lock for one short transaction and are left alone).
func (w *Watchdog) silence(id string, raw []byte, owner job.Owner, now time.Time) (time.Duration, bool) {
	if owner.Agent == "" || job.ValidateID(owner.Agent) != nil {
		return 0, false
	}
	seen := "absent"
	j, err := w.jobs.ReadRunning(owner.Agent, id)
	switch {
	case err == nil:
		hb := ""
		if j.LastHeartbeat != nil {
			hb = j.LastHeartbeat.Format(time.RFC3339Nano)
		}
		seen = string(j.Status) + " " + j.ClaimToken + " " + hb
	case !errors.Is(err, job.ErrNotFound): // gone meanwhile: counts as absent
		seen = "unreadable: " + errClass(err)
	}
	return w.unchanged("lock/"+id, string(raw)+"\n"+seen, now), true
}

// quarantineLock moves a non-directory planted as a lock (a symlink or a
// file) out of the way into corrupt/; no holder ever makes one.
func (w *Watchdog) quarantineLock(id string) {
	l := w.log.With().Str("job_id", id).Logger()
	q, err := w.jobs.QuarantineLock(id, "not a directory where a claim lock must be")
	if err != nil {
		if !errors.Is(err, job.ErrNotFound) {
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
	agents, err := w.jobs.StateNames(job.InProgress)
	if err != nil {
		return err
	}
	var errs []error
	present := map[string]bool{}
	defer func() {
		for key := range w.seen {
			if strings.HasPrefix(key, "job/") && !present[key] && ctx.Err() == nil {
				delete(w.seen, key)
			}
		}
	}()
	for _, agent := range agents.Dirs {
		ents, err := w.jobs.AgentNames(agent)
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
			if _, err := w.jobs.StatLock(id); err == nil {
				w.locks[id] = true
				continue
			} else if !errors.Is(err, fs.ErrNotExist) {
				continue
			}
			key := "job/" + agent + "/" + id
			present[key] = true
			age := w.unchanged(key, "no lock", now)
			if mt, err := w.jobs.RunningChangedAt(agent, id); err == nil {
				age = max(age, time.Since(mt)) // as for a lock without owner
			}
			if age < w.cfg.LockGrace {
				continue // a claim or recovery may be under way
			}
			reason := fmt.Sprintf("owner died: in-progress job has no lock (agent %s)", agent)
			out, err := w.jobs.Reconcile(id, Actor, reason)
			w.logOutcome(out, VerdictNoLock, reason, err)
			if err != nil && !errors.Is(err, store.ErrBusy) {
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
		if errors.Is(err, store.ErrBusy) || errors.Is(err, job.ErrNotFound) {
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
		j, rerr := w.jobs.ReadIn(out.To, out.ID)
		if rerr != nil { // already moved on (managerd is fast): log what we know
			j = &job.Job{ID: out.ID, Status: out.To, Reason: reason, Kind: w.jobs.KindOf(out.ID)}
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

// durabilityLost ends Run after a failed fsync or syncfs of this process
// (spoolstore.Store.DurabilityErr): nothing it writes can be promised durable any
// more, so it stops and exits non-zero; its restart and the recovery that
// follows read the truth from disk.
func durabilityLost(log zerolog.Logger, err error) error {
	log.Error().Err(err).Msg("durability lost: a sync of the spool failed; exiting so that recovery reads the truth from disk")
	return fmt.Errorf("stopped: %w", err)
}
