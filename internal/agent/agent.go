// Package agent is agentd's logic: it claims the best jobs for each free
// worker slot from its store (store.Store: a spool's, whose bounded index
// of incoming/ makes claims cheap, or PostgreSQL), runs their handlers
// while heartbeating and watching for operator requests, and commits the
// outcome. On drain it lets running jobs finish within a timeout, then
// releases the rest back to queued.
package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/internal/tally"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// Config configures an Agent.
type Config struct {
	// Spool, when set, is where the jobs are: New makes its store
	// (SpoolStore, with Rescan and NoNotify) and Run closes it. Set
	// Spool or Store, not both.
	Spool        *job.Spool
	ID           string             // agent id: in-progress/<ID>/
	Handlers     map[string]Handler // by job kind
	Concurrency  int                // worker slots (default 1)
	Timeout      time.Duration      // per job; 0 = none
	Heartbeat    time.Duration      // default 2s
	ControlPoll  time.Duration      // default 200ms (1s on a remote store)
	DrainTimeout time.Duration      // default 30s
	Rescan       time.Duration      // with Spool: the index's rescans of incoming/ (default 10s)
	NoNotify     bool               // no fsnotify: rescans only (paused/'s; with Spool, the index's too)
	// A handler that cannot start a job (ErrHandlerUnusable) blocks its
	// kind: rechecked after OutageBackoff (default 2s), doubling up to
	// OutageBackoffMax (default 30s).
	OutageBackoff    time.Duration
	OutageBackoffMax time.Duration
	// Kinds, when not nil, are the only kinds claimed (agentd --kinds):
	// the handlers of other kinds are dropped, and a kind of the list
	// without a handler makes New fail with a *ConfigError.
	Kinds []string
	// Store, when set, is where the jobs are: a spool's store
	// (SpoolStore, as agentd makes it; its claims are local, see
	// spoolAttempt) or PostgreSQL (one queue for agents on several
	// hosts); see store.go. Local is this host's local directory for a
	// remote store (the handler records, internal/localrun); Lease each
	// claim's lease there (default DefaultLease); StorePoll the longest
	// wait between two claims when the queue looked empty (default 1s; a
	// store that notifies wakes the slots sooner).
	Store     store.Store
	Local     string
	Lease     time.Duration
	StorePoll time.Duration
	// PauseRescan is the longest time between two listings of paused/
	// (queue-wide pauses of a kind); default 500ms. inotify events on
	// paused/ are acted on at once.
	PauseRescan time.Duration
	Log         zerolog.Logger
}

// Agent runs jobs from one spool.
type Agent struct {
	cfg    Config
	holder job.Holder
	// spool is the spool behind a spool store (nil on a remote store):
	// paused/, this agent's in-progress directory, the priority hints.
	spool *job.Spool
	// ownStore: New made the store (Config.Spool); Run closes it.
	ownStore bool
	// byListing: Ready waits for the store's first listing (a spool
	// store's index), not for the first claim.
	byListing bool
	log       zerolog.Logger
	busy      atomic.Int64
	ready     chan struct{}
	rdOnce    sync.Once
	// Commits run behind the slots: a slot hands its outcome over and
	// claims its next job, so the next claim shares its group-commit
	// barrier with the commit (pkg/job). commitSem bounds the commits in
	// flight (sixteen per slot: short jobs finish faster than one
	// barrier, and the more commits wait on a barrier together the fewer
	// syncfs calls per job: 1.5 -> 0.7 with four per slot, 0.26 -> 0.08
	// with sixteen and aheadMax 8, in BenchmarkBurnDown on a journaled
	// ext4); commits lets Run wait for them.
	commitSem chan struct{}
	commits   sync.WaitGroup
	// abandon is closed when the drain has waited long enough for
	// commits that keep failing: they stop retrying and leave the job
	// to recovery (its job.json already names the outcome).
	abandon chan struct{}
	durable durability // see durability.go
	runs    runTimes   // recent handler times: how many to claim at once (ahead.go)
	out     outages    // see outage.go
	// noHandler: the kinds without a handler already logged.
	noHandler sync.Map
	// notListed: the kinds with a handler that Config.Kinds left out.
	notListed map[string]bool
	// paused: the kinds paused queue-wide (paused/), as last listed;
	// pauseErr and pauseIgnored are what refreshPauses logged already
	// (used by its goroutine alone).
	paused       atomic.Pointer[map[string]bool]
	pauseErr     bool
	pauseIgnored map[string]bool
}

// Stop causes, for context.Cause.
var (
	errDrain   = errors.New("agent draining: job released")
	errLost    = errors.New("job taken away (declared silent)")
	errTimeout = errors.New("timed out")
	// errNoHandler: a job of a kind this agent has no handler for got
	// claimed (its job.json was unreadable when the store's index saw
	// it). It is released, not failed; the index parks it when it
	// reappears.
	errNoHandler = errors.New("no handler for this kind on this agent")
)

type controlCause struct{ c *job.Control }

func (c controlCause) Error() string { return "operator " + c.c.Action }

// New checks cfg and returns an Agent. A handler that implements Checker
// and fails its Check is refused with a *HandlerError (exit status
// ExitHandlerUnusable): an agent never starts with a handler that would
// release every job of its kind.
func New(cfg Config) (*Agent, error) {
	if err := job.ValidateID(cfg.ID); err != nil {
		return nil, fmt.Errorf("agent id: %w", err)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 2 * time.Second
	}
	if (cfg.Store == nil) == (cfg.Spool == nil) {
		return nil, errors.New("agent: one of Spool and Store, not both")
	}
	own := false
	if cfg.Spool != nil {
		// Started by the first claim; nothing runs before Run.
		cfg.Store, own = SpoolStore(cfg.Spool, cfg.Rescan, cfg.NoNotify, cfg.Log), true
	}
	var sp *job.Spool
	if l, ok := cfg.Store.(interface{ Spool() *job.Spool }); ok {
		sp = l.Spool()
	}
	if cfg.ControlPoll <= 0 {
		cfg.ControlPoll = 200 * time.Millisecond
		if sp == nil {
			// A query per running job each time: a database shared by
			// many agents is asked five times less.
			cfg.ControlPoll = time.Second
		}
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	if cfg.OutageBackoff <= 0 {
		cfg.OutageBackoff = defaultOutageBackoff
	}
	if cfg.OutageBackoffMax < cfg.OutageBackoff {
		cfg.OutageBackoffMax = max(defaultOutageBackoffMax, cfg.OutageBackoff)
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.StorePoll <= 0 {
		cfg.StorePoll = defaultStorePoll
	}
	if cfg.PauseRescan <= 0 {
		cfg.PauseRescan = defaultPauseRescan
	}
	notListed, err := selectKinds(&cfg)
	if err != nil {
		return nil, err
	}
	kinds := make([]string, 0, len(cfg.Handlers))
	for kind := range cfg.Handlers {
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		if c, ok := cfg.Handlers[kind].(Checker); ok {
			if err := c.Check(); err != nil {
				return nil, &HandlerError{Kind: kind, Err: err}
			}
		}
	}
	actor := "agentd/" + cfg.ID
	a := &Agent{
		cfg: cfg, holder: job.Holder{Actor: actor, Agent: cfg.ID},
		spool: sp, ownStore: own, log: cfg.Log, ready: make(chan struct{}),
		commitSem: make(chan struct{}, 16*cfg.Concurrency), abandon: make(chan struct{}),
		durable:   durability{lost: make(chan struct{})},
		out:       outages{down: map[string]*outage{}},
		notListed: notListed,
	}
	return a, nil
}

// Ready is closed once the store's first listing of incoming/ is done (a
// spool store), or once the first claim was tried (a store that does not
// list).
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Busy is the number of jobs running now.
func (a *Agent) Busy() int { return int(a.busy.Load()) }

// Run claims and runs jobs until ctx is done, then drains: running jobs get
// DrainTimeout to finish, after which they are stopped and released.
// After a failed sync (fsq.ErrDurability) it stops at once and returns an
// error wrapping it (see durability.go).
func (a *Agent) Run(ctx context.Context) error {
	if a.ownStore {
		defer a.cfg.Store.Close()
	}
	if a.spool != nil {
		if err := fsq.MkdirDurable(a.spool.AgentDir(a.cfg.ID)); err != nil {
			return err
		}
	}
	tally.SetSlots(a.cfg.Concurrency)
	a.out.bg, a.out.stopBg = context.WithCancel(context.Background())
	defer a.out.wg.Wait()
	defer a.out.stopBg()
	if a.spool != nil {
		// Paused kinds are known before the first claim (and before
		// Ready). The watch outlives ctx, as the store's index does:
		// released jobs are committed during the drain.
		watchCtx, stopWatch := context.WithCancel(context.Background())
		defer stopWatch()
		stopPauses := a.watchPauses(watchCtx)
		defer stopPauses()
	}
	return a.runSlots(ctx)
}

// runSlots runs the worker slots until ctx is done, then drains.
func (a *Agent) runSlots(ctx context.Context) error {
	// Jobs run under runCtx, which outlives ctx by the drain timeout.
	runCtx, stopRuns := context.WithCancelCause(context.Background())
	defer stopRuns(nil)
	ctx, a.durable.stop = context.WithCancel(ctx) // durability lost: stop claiming
	defer a.durable.stop()
	var wg sync.WaitGroup
	if l, ok := a.cfg.Store.(lister); ok {
		a.byListing = true
		listed := l.Listed()
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-listed:
				a.rdOnce.Do(func() { close(a.ready) })
			case <-ctx.Done():
			}
		}()
	}
	for i := 0; i < a.cfg.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.slot(ctx, runCtx)
		}()
	}
	<-ctx.Done()
	a.log.Info().Int("running", a.Busy()).Dur("drain_timeout_ms", a.cfg.DrainTimeout).Msg("draining")
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-a.durable.lost: // nothing can be committed any more: don't drain
		stopRuns(errDrain)
		<-done
	case <-time.After(a.cfg.DrainTimeout):
		a.log.Warn().Int("running", a.Busy()).Msg("drain timeout: releasing running jobs")
		stopRuns(errDrain)
		<-done
	}
	committed := make(chan struct{})
	go func() { a.commits.Wait(); close(committed) }()
	select {
	case <-committed:
	case <-time.After(a.cfg.DrainTimeout):
		a.log.Error().Msg("drain timeout: commits still failing are left to watchdogd")
		close(a.abandon)
		<-committed
	}
	return a.durabilityErr()
}

// slot is one worker: claim, run, commit, until ctx is done. While the
// jobs run briefly it claims a few at a time, behind one barrier (see
// ahead.go); jobs it claimed and did not start are released when ctx is
// done.
func (a *Agent) slot(ctx, runCtx context.Context) {
	var ahead []claimedJob
	defer func() {
		for _, cj := range ahead {
			a.releaseUnstarted(cj.c)
		}
	}()
	for {
		if len(ahead) == 0 {
			ahead = a.claimBatch(ctx)
			if len(ahead) == 0 {
				if ctx.Err() != nil {
					return
				}
				continue
			}
		}
		if ctx.Err() != nil {
			return // the deferred release gives the rest back
		}
		cj := ahead[0]
		ahead = ahead[1:]
		if !a.keepFresh(cj) {
			continue // taken away while it waited: nothing to run
		}
		a.busy.Add(1)
		tally.SlotBusy(1)
		a.run(runCtx, cj.c)
		tally.SlotBusy(-1)
		a.busy.Add(-1)
	}
}

// run executes one claimed job and hands its outcome to a commit that runs
// behind the slot.
func (a *Agent) run(runCtx context.Context, c attempt) {
	runStart := time.Now()
	env := c.Envelope()
	j := env.Lifecycle
	l := logx.ForJob(a.log, j)
	l.Transition(j, job.Queued)

	hctx, stop := context.WithCancelCause(runCtx)
	defer stop(nil)
	if a.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeoutCause(hctx, a.cfg.Timeout, fmt.Errorf("%w after %s", errTimeout, a.cfg.Timeout))
		defer cancel()
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.supervise(hctx, stop, c, env.Runtime.Dir, l.Logger)
	}()

	h := a.cfg.Handlers[j.Kind]
	var res Result
	if h == nil {
		res.Err = fmt.Errorf("%w: kind %q", errNoHandler, j.Kind)
	} else {
		// The handler's identity goes into the lock: if this agent dies,
		// watchdogd makes sure the handler (and whatever it started) is
		// gone before the job can run again.
		started := func(pid int) {
			id, err := proc.Of(pid)
			if err == nil {
				err = c.RecordHandler(id)
			}
			if err != nil {
				l.Warn().Err(err).Int("pid", pid).Msg("cannot record the handler in the job's lock")
			}
		}
		res = h.Run(hctx, Task{Env: env, Started: started, Fence: c.Fence})
		a.handlerOutcome(j.Kind, runStart, res.Err)
	}
	cause := context.Cause(hctx)
	stop(nil)
	wg.Wait()
	a.noteRun(time.Since(runStart))
	a.commitBehind(c, env.Runtime.Dir, res, cause, l, runStart)
}

// commitBehind hands the outcome to a commit that runs behind the slot.
func (a *Agent) commitBehind(c attempt, dir string, res Result, cause error, l logx.JobLogger, runStart time.Time) {
	a.commitSem <- struct{}{}
	a.commits.Add(1)
	go func() {
		defer a.commits.Done()
		a.commit(c, dir, res, cause, l)
		runFinished(c, runStart)
		<-a.commitSem
	}()
}

// supervise heartbeats and polls for operator requests while the handler
// runs; it stops the handler (through stop) when the job is taken away or
// an operator asks.
func (a *Agent) supervise(ctx context.Context, stop context.CancelCauseFunc, c attempt, dir string, l zerolog.Logger) {
	hb := time.NewTicker(a.cfg.Heartbeat)
	defer hb.Stop()
	poll := time.NewTicker(a.cfg.ControlPoll)
	defer poll.Stop()
	warned := false // an unreadable control request was logged
	for {
		select {
		case <-ctx.Done():
			return
		case <-hb.C:
			if err := c.Heartbeat(); err != nil {
				if job.Superseded(err) {
					l.Warn().Err(err).Msg("claim superseded: the job was taken away; stopping the handler")
					stop(errLost)
					return
				}
				if a.durabilityLost(err) {
					return
				}
				l.Warn().Err(err).Msg("heartbeat failed")
			}
		case <-poll.C:
			ctl, err := c.PendingControl()
			if err != nil && job.Superseded(err) {
				l.Warn().Err(err).Msg("claim superseded: the job was taken away; stopping the handler")
				stop(errLost)
				return
			}
			if err != nil {
				warned = a.badControl(dir, err, warned, l)
				continue
			}
			if ctl != nil {
				l.Info().Str("action", ctl.Action).Str("requested_by", ctl.Actor).Msg("operator request: stopping handler")
				stop(controlCause{ctl})
				return
			}
		}
	}
}

// commit records the outcome. Who stopped the handler decides the state.
func (a *Agent) commit(c attempt, dir string, res Result, cause error, l logx.JobLogger) {
	var ctl controlCause
	var to job.State
	var reason string
	mutate := func(j *job.Job) { j.ExitCode = res.ExitCode }
	if !errors.As(cause, &ctl) && !errors.Is(cause, errLost) {
		// A request that came while the handler was finishing still
		// wins: it was acknowledged to the operator.
		if p, err := c.PendingControl(); err == nil && p != nil {
			l.Info().Str("action", p.Action).Str("requested_by", p.Actor).Msg("operator request arrived as the handler finished: applied")
			cause = controlCause{p}
		}
	}
	switch {
	case errors.Is(cause, errLost):
		l.Warn().Msg("job was taken away by recovery while running; not committing")
		return
	case errors.As(cause, &ctl):
		to, reason = job.Killed, "cancelled"
		switch ctl.c.Action {
		case job.ControlHold:
			to, reason = job.Held, "held by operator"
		case job.ControlKill:
			reason = "killed by operator"
		}
		if ctl.c.Reason != "" {
			reason += ": " + ctl.c.Reason
		}
		// An operator's hold, like a drain release, costs no attempt
		// (job.Control.Refund); cancel and kill keep their count.
		mutate = func(j *job.Job) { j.ExitCode = res.ExitCode; ctl.c.Refund(j) }
		fsq.CrashPoint("agent/remove-control:before", ctl.c.Action) // for test/crash; no-op in release builds
		if err := c.DropControl(); err != nil {
			l.Warn().Err(err).Msg("remove control request")
		}
	case errors.Is(cause, errDrain):
		to, reason = job.Queued, "released: agent shut down before the job finished"
		mutate = func(j *job.Job) {
			j.Attempts-- // a graceful release is not an attempt
			j.Agent, j.StartedAt, j.LastHeartbeat, j.ExitCode = "", nil, nil, nil
		}
	case errors.Is(res.Err, ErrHandlerUnusable), errors.Is(res.Err, errNoHandler):
		// The job never ran: not its fault, not an attempt.
		to, reason = job.Queued, "released: "+firstLine(res.Err.Error(), 200)
		mutate = func(j *job.Job) {
			j.Attempts--
			j.Agent, j.StartedAt, j.LastHeartbeat, j.ExitCode = "", nil, nil, nil
		}
	case res.Err == nil:
		to = job.Succeeded
	default:
		to, reason = job.Failed, firstLine(res.Err.Error(), 200)
		mutate = func(j *job.Job) { j.ExitCode, j.Error = res.ExitCode, res.Err.Error() }
	}
	if res.OutputDropped > 0 {
		inner := mutate
		mutate = func(j *job.Job) { inner(j); j.OutputDropped = res.OutputDropped }
	}
	commitStart := time.Now()
	// A commit that fails is rolled forward, never walked away from: the
	// lock is still ours, so nobody else would finish it. Commit resumes
	// from the step that failed.
	backoff := 100 * time.Millisecond
	for try := 1; ; try++ {
		err := c.Commit(to, reason, mutate)
		if err == nil {
			break
		}
		if job.Superseded(err) {
			l.Warn().Err(err).Msg("job was taken away by recovery before commit; nothing written")
			return
		}
		if a.durabilityLost(err) {
			return // logged once; watchdogd recovers the job after the restart
		}
		if errors.Is(err, job.ErrIllegal) {
			l.Error().Err(err).Msg("commit refused")
			return
		}
		l.Error().Err(err).Int("try", try).Dur("retry_in_ms", backoff).Msg("commit failed; retrying")
		select {
		case <-a.abandon:
			l.Error().Err(err).Msg("commit abandoned at shutdown; watchdogd will finish it once this agent is gone")
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	tally.CommitDone(c.Envelope().Lifecycle.Kind, time.Since(commitStart))
	l.Transition(c.Envelope().Lifecycle, job.InProgress)
	if j := c.Envelope().Lifecycle; a.spool != nil && j.Priority != 0 && j.Status.Terminal() {
		// Its priority hint serves no more (a retry writes it again).
		if err := a.spool.DropHint(j.Priority, j.ID); err != nil {
			l.Warn().Err(err).Msg("cannot remove the job's priority hint")
		}
	}
}

// firstLine shortens s to its first line and at most n bytes, for reasons;
// the whole text goes to job.json's error field.
func firstLine(s string, n int) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			s = s[:i]
			break
		}
	}
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
