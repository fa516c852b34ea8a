// Package manager is managerd's policy engine. It drives the jobs nobody
// holds forward:
//
//   - completed/failed: a job with attempts left is deferred for a retry
//     after an exponential backoff with full jitter (not_before = now +
//     random [0, min(backoff-max, backoff-base*2^(attempts-1))]); a job out
//     of attempts is killed ("failed N times: out of attempts").
//   - stale/: a crash is not the job's fault, so a job with attempts left is
//     requeued at once ("requeued after crash (attempt N/M)", N being the
//     attempt that crashed); otherwise it is killed ("crashed and exceeded
//     max retries (M)"). The crash cause moves to the job's error field.
//   - deferred/: jobs whose not_before has passed are moved to incoming/.
//     The manager keeps an in-memory schedule of the earliest
//     DeferredCap deferred jobs by not_before (see schedule), fed by
//     watch events, a fill of deferred/ made at start and whenever the
//     schedule runs low, and a rolling rescan of RescanChunk names per
//     Rescan; a job.json is read when the job is due, when it came into
//     deferred/, or by a fill, never once per period.
//   - tmp/: leftovers older than TmpMaxAge are removed.
//   - retention: terminal jobs (succeeded, killed) older than Retention are
//     removed, scanning at most every RetentionEvery and at most
//     RetentionChunk entries of each directory per scan (a lap over a
//     big directory spans several scans).
//
// The manager reaches the spool through its store only
// (*spoolstore.Store: the watch of the state directories, their cursors,
// reads, moves, repairs and sweeps; see pkg/store/spoolstore/engine.go).
// Every move goes through job.Spool.Move (spoolstore's MoveListed), which
// holds the job's claim lock; a busy lock (store.ErrBusy) is retried when
// the lock goes away, or after RetryBusy. A lost race (the job gone from
// where it was seen: job.ErrNotFound) is not an error. A job's
// max_attempts overrides MaxAttempts.
package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// Actor is the name managerd writes into events and lock owner files.
const Actor = "managerd"

// Config is managerd's policy. Zero fields take the defaults below.
type Config struct {
	MaxAttempts    int           // for jobs whose max_attempts is 0 (default 3)
	BackoffBase    time.Duration // first retry's backoff cap (default 1s)
	BackoffMax     time.Duration // largest backoff cap (default 5m)
	Retention      time.Duration // age at which terminal jobs are removed; 0 keeps them forever
	RetentionEvery time.Duration // how often retention scans (default 1m)
	// EventsRetention is the age at which the event stream's segments
	// (events/) are removed; 0 keeps them forever.
	EventsRetention time.Duration
	TmpMaxAge       time.Duration // age at which tmp/ leftovers are removed (default 1h)
	Rescan          time.Duration // period of full rescans (default 10s)
	RetryBusy       time.Duration // retry period for jobs whose lock was busy (default 1s)
	NoNotify        bool          // rely on rescans only (no fsnotify)
	// DeferredCap bounds the schedule of deferred jobs kept in memory
	// (default 65536; up to twice as many between two trims).
	DeferredCap int
	// RescanChunk is how many names of deferred/ one Rescan relists to
	// find what a lost event hid (default 4096).
	RescanChunk int
	// FillChunk is how many names of deferred/ one step of a fill reads
	// between two looks at the loop's events (default 512).
	FillChunk int
	// RetentionChunk is how many entries of completed/succeeded/ and of
	// completed/killed/ one retention scan looks at (default 20000).
	RetentionChunk int
	// Ready is called once, after Run's first full pass.
	Ready func()
	// Rand returns a random int64 in [0, n); nil means math/rand/v2.
	Rand func(n int64) int64
}

func (c *Config) defaults() {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = job.DefaultMaxAttempts
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 5 * time.Minute
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = c.BackoffBase
	}
	if c.RetentionEvery <= 0 {
		c.RetentionEvery = time.Minute
	}
	if c.TmpMaxAge <= 0 {
		c.TmpMaxAge = time.Hour
	}
	if c.Rescan <= 0 {
		c.Rescan = 10 * time.Second
	}
	if c.RetryBusy <= 0 {
		c.RetryBusy = time.Second
	}
	if c.Rand == nil {
		c.Rand = defaultRand
	}
	if c.DeferredCap <= 0 {
		c.DeferredCap = 65536
	}
	if c.RescanChunk <= 0 {
		c.RescanChunk = 4096
	}
	if c.FillChunk <= 0 {
		c.FillChunk = 512
	}
	if c.RetentionChunk <= 0 {
		c.RetentionChunk = 20000
	}
}

// Manager runs the policy over one spool, through its store. Its
// methods are not safe for concurrent use, except Alive.
type Manager struct {
	store *spoolstore.Store
	cfg   Config
	log   zerolog.Logger

	sched            *schedule
	fill             *spoolstore.StateCursor // a fill of deferred/ under way (nil: none)
	filled           bool                    // a fill was started once
	fillStart        time.Time               // when the last fill started
	rescanCur        *spoolstore.StateCursor // rolling rescan of deferred/
	retainCur        map[job.State]*spoolstore.StateCursor
	reads, stats     int64                // job.json reads and rescan lstats of deferred jobs (tests, benchmark)
	busy             map[string]job.State // jobs to retry: their lock was held
	schemaSeen       map[string]bool      // unknown schema versions already reported
	lastRetain       time.Time
	lastEventsRetain time.Time
	active           atomic.Int64 // unix nanoseconds of the last loop activity

	beforeExpire func(id string) // tests: runs between retention's read and its removal
}

// New returns a manager for the spool of store s.
func New(s *spoolstore.Store, cfg Config, log zerolog.Logger) *Manager {
	cfg.defaults()
	m := &Manager{
		store: s, cfg: cfg, log: log,
		sched: newSchedule(cfg.DeferredCap), busy: map[string]job.State{}, schemaSeen: map[string]bool{},
		rescanCur: s.StateCursor(job.Deferred),
		retainCur: map[job.State]*spoolstore.StateCursor{
			job.Succeeded: s.StateCursor(job.Succeeded),
			job.Killed:    s.StateCursor(job.Killed),
		},
	}
	m.touch()
	return m
}

func (m *Manager) touch() { m.active.Store(time.Now().UnixNano()) }

// Alive reports whether the loop has made progress recently; systemd's
// watchdog pings stop when it does not.
func (m *Manager) Alive() bool {
	limit := 3 * m.cfg.Rescan
	if limit < 30*time.Second {
		limit = 30 * time.Second
	}
	return time.Since(time.Unix(0, m.active.Load())) < limit
}

// RunOnce is one full pass: it lists failed/ and stale/ and drives every
// job in them, fills the schedule of deferred/ (the first time, or when
// it runs low) or else rescans the next RescanChunk names of deferred/,
// promotes the due ones, sweeps tmp/ and, at most every RetentionEvery,
// applies retention. Per-job problems are logged and do not stop the
// pass; the error reports directories that could not be scanned.
func (m *Manager) RunOnce(ctx context.Context) error {
	return m.pass(ctx, true)
}

// pass is RunOnce; without drain a fill it starts is left to the loop,
// which makes it in steps (Run).
func (m *Manager) pass(ctx context.Context, drain bool) error {
	m.touch()
	clear(m.busy) // every busy job is met again by this pass
	var errs []error
	for _, st := range []job.State{job.Stale, job.Failed} {
		if err := m.scanState(ctx, st); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case m.fill != nil:
	case !m.filled || m.sched.needFill(time.Now()):
		m.startFill()
	default:
		if err := m.rescanDeferred(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if drain {
		for m.fill != nil && ctx.Err() == nil {
			if err := m.fillStep(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	m.promoteDue(ctx)
	if err := m.sweepTmp(ctx); err != nil {
		errs = append(errs, err)
	}
	if m.cfg.Retention > 0 && time.Since(m.lastRetain) >= m.cfg.RetentionEvery {
		m.lastRetain = time.Now()
		if err := m.applyRetention(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.expireEvents(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run watches failed/, stale/, deferred/ and the locks in incoming/, and
// acts on every change within milliseconds; it promotes deferred jobs when
// they are due and makes a full pass (RunOnce) on every rescan. It returns
// nil when ctx is done.
// EventCoalesce is how long managerd lets directory events gather before
// it reads them (spoolstore.StateWatchConfig.Coalesce): a failed job is retried, a
// stale one requeued, at most this much later, and a busy queue wakes it
// about 50 times a second instead of once per lock.
const EventCoalesce = 20 * time.Millisecond

func (m *Manager) Run(ctx context.Context) error {
	// Events are read in batches (EventCoalesce): incoming/ sees a lock
	// made and removed per claim, and nothing here is in a hurry.
	watch := m.store.WatchStates(ctx, spoolstore.StateWatchConfig{
		States: []job.State{job.Failed, job.Stale, job.Deferred, job.Queued},
		Rescan: m.cfg.Rescan, NoNotify: m.cfg.NoNotify, Coalesce: EventCoalesce,
		OnFallback: func(err error) {
			m.log.Warn().Err(err).Msg("fsnotify unavailable; relying on periodic rescans")
		},
	})
	defer watch.Stop()
	defer m.closeCursors()

	timer := time.NewTimer(m.cfg.Rescan)
	defer timer.Stop()
	ready := false
	for {
		if err := m.store.DurabilityErr(); err != nil {
			return durabilityLost(m.log, err)
		}
		timer.Reset(m.sleep())
		var more <-chan time.Time // ready at once while a fill is under way
		if ready && m.fill != nil {
			more = alwaysReady
		}
		select {
		case <-ctx.Done():
			return nil
		case <-more:
			m.touch()
			if err := m.fillStep(ctx); err != nil {
				m.log.Error().Err(err).Msg("pass incomplete")
			}
			m.promoteDue(ctx)
		case ev := <-watch.Events:
			m.touch()
			if ev.Rescan {
				if err := m.pass(ctx, false); err != nil {
					m.log.Error().Err(err).Msg("pass incomplete")
				}
				if !ready {
					ready = true
					m.log.Info().Int("deferred", m.sched.len()).Msg("first pass done; ready")
					if m.cfg.Ready != nil {
						m.cfg.Ready()
					}
				}
				continue
			}
			m.handleEvent(watch.State(ev), ev)
			m.promoteDue(ctx)
		case <-timer.C:
			m.touch()
			if m.fill == nil && m.sched.needFill(time.Now()) {
				m.startFill()
			}
			m.promoteDue(ctx)
			m.retryBusy(ctx)
		}
	}
}

// alwaysReady is a channel that is always ready: the loop's select takes
// it among whatever else is ready (select picks at random), so an event
// waits for one step of a fill at most.
var alwaysReady = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

func (m *Manager) closeCursors() {
	if m.fill != nil {
		m.fill.Close()
		m.fill = nil
	}
	m.rescanCur.Close()
	for _, c := range m.retainCur {
		c.Close()
	}
}

// sleep is how long the loop may wait for an event: until the earliest
// deferred job is due, or the next retry of a busy job.
func (m *Manager) sleep() time.Duration {
	d := m.cfg.Rescan
	if at, ok := m.sched.next(); ok {
		d = min(d, time.Until(at))
	}
	if at, ok := m.sched.wake(); ok && m.fill == nil {
		d = min(d, time.Until(at))
	}
	if len(m.busy) > 0 {
		d = min(d, m.cfg.RetryBusy)
	}
	return max(d, 0)
}

func (m *Manager) handleEvent(st job.State, ev spoolstore.StateEvent) {
	switch {
	case st == job.Failed && ev.Created, st == job.Stale && ev.Created:
		m.process(st, ev.Name)
	case st == job.Deferred && ev.Created:
		if !m.sched.has(ev.Name) { // known: managerd deferred it itself
			m.noteDeferred(ev.Name)
		}
	case st == job.Deferred && ev.Removed:
		m.sched.remove(ev.Name)
	case st == job.Queued && ev.Removed && strings.HasSuffix(ev.Name, job.LockSuffix):
		id := strings.TrimSuffix(ev.Name, job.LockSuffix)
		if bst, ok := m.busy[id]; ok {
			delete(m.busy, id)
			m.process(bst, id)
		}
	}
}

func (m *Manager) retryBusy(ctx context.Context) {
	if len(m.busy) == 0 {
		return
	}
	retry := make(map[string]job.State, len(m.busy))
	for id, st := range m.busy {
		retry[id] = st
	}
	clear(m.busy)
	for id, st := range retry {
		if ctx.Err() != nil {
			m.busy[id] = st
			continue
		}
		m.process(st, id)
	}
}

// scanState drives every entry of st's directory (failed/ or stale/).
func (m *Manager) scanState(ctx context.Context, st job.State) error {
	ents, err := m.store.StateNames(st)
	if err != nil {
		return err
	}
	for _, name := range append(ents.Dirs, ents.Hostile...) {
		if ctx.Err() != nil {
			return nil
		}
		m.process(st, name)
	}
	return nil
}

// process drives the job named name in state st one step and logs the
// outcome once.
func (m *Manager) process(st job.State, name string) {
	var err error
	switch st {
	case job.Failed:
		err = m.handleFailed(name)
	case job.Stale:
		err = m.handleStale(name)
	case job.Deferred:
		err = m.promote(name)
	default:
		return
	}
	m.report(st, name, err)
}

func (m *Manager) report(st job.State, id string, err error) {
	l := m.log.With().Str("job_id", id).Str("state", string(st)).Logger()
	switch {
	case err == nil:
	case errors.Is(err, store.ErrBusy), errors.Is(err, errChanged):
		m.busy[id] = st
		l.Debug().Err(err).Msg("job busy; will retry")
	case errors.Is(err, job.ErrNotFound): // a lost race
		l.Debug().Err(err).Msg("job moved by someone else")
	case errors.Is(err, job.ErrCorrupt):
		l.Error().Err(err).Msg("corrupt job quarantined")
	case errors.Is(err, job.ErrSchema):
		if !m.schemaSeen[id] {
			m.schemaSeen[id] = true
			l.Error().Err(err).Msg("unknown schema version; job left in place")
		}
	default:
		l.Error().Err(err).Msg("cannot drive job")
	}
}

// read reads a job of state st without its lock, to decide what to do.
// (A deferred job's reads are counted: the benchmark reports them.)
// A corrupt job is quarantined (under its lock); a job whose status
// disagrees with its directory is reconciled.
func (m *Manager) read(st job.State, id string) (*job.Job, error) {
	if err := job.ValidateID(id); err != nil {
		return nil, m.store.QuarantineUnnamed(st, id, err)
	}
	if st == job.Deferred {
		m.reads++
	}
	j, err := m.store.ReadIn(st, id)
	if err != nil {
		if errors.Is(err, job.ErrCorrupt) {
			return nil, m.quarantine(st, id, err)
		}
		return nil, err
	}
	if j.Status != st {
		return nil, m.reconcile(id, fmt.Sprintf("status %s found in %s/", j.Status, st.Dir()))
	}
	return j, nil
}

func (m *Manager) handleFailed(id string) error {
	j, err := m.read(job.Failed, id)
	if err != nil || j == nil {
		return err
	}
	to, reason, mutate := m.failedStep(j)
	nj, err := m.store.MoveListed(id, job.Failed, to, Actor, reason, mutate)
	if err != nil {
		return err
	}
	logx.Transition(m.log, nj, job.Failed)
	counted(job.Failed, nj.Status)
	if nj.Status == job.Deferred && nj.NotBefore != nil {
		mt, _ := m.store.ChangedAt(job.Deferred, id) // zero, unknown: the next rescan reads it once more
		m.sched.set(id, *nj.NotBefore, mt)
	}
	return nil
}

func (m *Manager) handleStale(id string) error {
	j, err := m.read(job.Stale, id)
	if err != nil || j == nil {
		return err
	}
	to, reason, mutate := m.staleStep(j)
	nj, err := m.store.MoveListed(id, job.Stale, to, Actor, reason, mutate)
	if err != nil {
		return err
	}
	logx.Transition(m.log, nj, job.Stale)
	counted(job.Stale, nj.Status)
	return nil
}

// noteDeferred indexes a deferred job by its not_before; anything unusual
// (no not_before, corrupt, wrong status) goes through promote, which
// deals with it.
func (m *Manager) noteDeferred(id string) {
	if job.ValidateID(id) == nil {
		// The directory's mtime before the read: a job.json replaced
		// during or after it changes the mtime, and is read again.
		mt, ferr := m.store.ChangedAt(job.Deferred, id)
		m.reads++
		j, err := m.store.ReadIn(job.Deferred, id)
		if errors.Is(err, job.ErrNotFound) { // gone from deferred/
			m.sched.remove(id)
			return
		}
		if ferr == nil && err == nil && j.Status == job.Deferred && j.NotBefore != nil {
			m.sched.set(id, *j.NotBefore, mt)
			return
		}
	}
	m.process(job.Deferred, id)
}

// changedSlack is how much older than a fill's start a job directory's
// mtime must be for the rescan to take it as read by that fill: file
// times come from a coarser clock than time.Now.
const changedSlack = 2 * time.Second

// startFill starts a fill of the schedule: a lap over deferred/ that
// reads every job not in the schedule (Config.FillChunk names a step).
func (m *Manager) startFill() {
	m.filled = true
	m.fillStart = time.Now()
	m.sched.refilling()
	m.fill = m.store.StateCursor(job.Deferred)
}

// fillStep makes one step of the fill under way.
func (m *Manager) fillStep(ctx context.Context) error {
	if m.fill == nil {
		return nil
	}
	ents, end, err := m.fill.Next(m.cfg.FillChunk)
	for _, id := range ents.Dirs {
		if ctx.Err() != nil {
			return nil // the cursor stays: the fill goes on from here
		}
		if !m.sched.has(id) {
			m.noteDeferred(id)
		}
	}
	for _, name := range ents.Hostile {
		m.process(job.Deferred, name)
	}
	if end {
		m.fill = nil
		m.log.Debug().Int("deferred", m.sched.len()).Bool("overflow", m.sched.overflow).
			Int64("duration_ms", time.Since(m.fillStart).Milliseconds()).Msg("deferred schedule filled")
	}
	return err
}

// rescanDeferred relists the next RescanChunk names of deferred/ (a lap
// over a big deferred/ spans several rescans) to find what a lost watch
// event or an edit in place hid, at the cost of one lstat per name: it
// reads the job.json of a job in the schedule only if the job's directory
// changed since it was read (every job.json write renames into it), and
// of a job not in it only if the schedule has room for it or the
// directory changed since the last fill started (that fill read it and
// found it beyond the horizon). Between rescans the schedule is kept by
// watch events alone.
func (m *Manager) rescanDeferred(ctx context.Context) error {
	ents, _, err := m.rescanCur.Next(m.cfg.RescanChunk)
	cutoff := m.fillStart.Add(-changedSlack)
	for _, id := range ents.Dirs {
		if ctx.Err() != nil {
			return nil
		}
		if job.ValidateID(id) == nil {
			m.stats++
			mt, err := m.store.ChangedAt(job.Deferred, id)
			if err != nil {
				continue // gone
			}
			if at, ok := m.sched.readAt(id); ok && at == mt.UnixNano() {
				continue
			} else if !ok && m.sched.overflow && mt.Before(cutoff) {
				continue
			}
		}
		m.noteDeferred(id)
	}
	for _, name := range ents.Hostile {
		m.process(job.Deferred, name)
	}
	return err
}

// promoteDue moves every deferred job whose not_before has passed to
// incoming/.
func (m *Manager) promoteDue(ctx context.Context) {
	for ctx.Err() == nil {
		id, ok := m.sched.popDue(time.Now())
		if !ok {
			return
		}
		m.process(job.Deferred, id)
	}
}

// promote moves deferred job id to incoming/ if it is due, or re-indexes
// it by the not_before its job.json has now.
func (m *Manager) promote(id string) error {
	j, err := m.read(job.Deferred, id)
	if err != nil || j == nil {
		return err
	}
	if j.NotBefore != nil && j.NotBefore.After(time.Now()) {
		// Not due: indexed again. Its directory's mtime is left unknown,
		// so the next rescan reads it once more rather than trust a read
		// it cannot date.
		m.sched.set(id, *j.NotBefore, time.Time{})
		return nil
	}
	nj, err := m.store.MoveListed(id, job.Deferred, job.Queued, Actor, "not_before reached", nil)
	if err != nil {
		return err
	}
	logx.Transition(m.log, nj, job.Deferred)
	counted(job.Deferred, nj.Status)
	return nil
}

// reconcile repairs a job whose status disagrees with its directory (a
// transaction cut short by a crash), under its lock. A held lock means the
// transaction is still running: retry later.
func (m *Manager) reconcile(id, why string) error {
	out, err := m.store.Reconcile(id, Actor, why)
	if err != nil {
		return err
	}
	l := m.log.With().Str("job_id", id).Str("action", out.Action).Logger()
	if out.Detail != "" {
		l = l.With().Str("detail", out.Detail).Logger()
	}
	if out.From != "" && out.To != "" {
		l.Warn().Str("reason", why).
			Dict("event", zerolog.Dict().Str("type", "state_transition").Str("from", string(out.From)).Str("to", string(out.To))).
			Msg("job reconciled")
	} else {
		l.Info().Str("reason", why).Msg("job reconciled")
	}
	return nil
}

// quarantine moves the corrupt job id of st to corrupt/ while holding
// its lock, after checking under the lock that it is still unreadable
// (spoolstore's QuarantineCorrupt). It returns an error matching
// job.ErrCorrupt when it did, errChanged when the job reads fine now.
func (m *Manager) quarantine(st job.State, id string, cause error) error {
	err := m.store.QuarantineCorrupt(st, id, Actor, cause)
	if errors.Is(err, spoolstore.ErrReadable) {
		return errChanged
	}
	return err
}

// durabilityLost ends Run after a failed fsync or syncfs of this process
// (spoolstore's DurabilityErr): nothing it writes can be promised durable any
// more, so it stops and exits non-zero; its restart and the recovery that
// follows read the truth from disk.
func durabilityLost(log zerolog.Logger, err error) error {
	log.Error().Err(err).Msg("durability lost: a sync of the spool failed; exiting so that recovery reads the truth from disk")
	return fmt.Errorf("stopped: %w", err)
}
