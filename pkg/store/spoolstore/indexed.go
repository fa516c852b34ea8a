package spoolstore

// The indexed spool store (WithIndex): what a long-lived claimer (agentd)
// needs to claim fast from a spool. Its Claim does not list incoming/:
// it takes the best candidates of a bounded index of incoming/ (index.go)
// fed by a watch of the directory (inotify, and a periodic rescan), and
// claims them with job.Spool.Claim, several at once when opts.Max asks
// for more than one, so that their claims share one group-commit
// barrier (pkg/job). The index, its watch and its goroutine start with
// the first Claim, WaitQueued or Listed, and stop with Close.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// IndexConfig configures the index of an indexed spool store.
type IndexConfig struct {
	// Rescan is the period of the watch's full rescans of incoming/
	// (fsq.WatchConfig's default when zero).
	Rescan time.Duration
	// NoNotify: no inotify, periodic rescans only.
	NoNotify bool
	// Cap bounds the candidates held (and the parked jobs of each kind);
	// default DefaultIndexCap.
	Cap int
	// Log gets the index's lines: a failed rescan, each refill (debug),
	// the inotify fallback, and each claim that did not take its job
	// (with its job_id).
	Log zerolog.Logger
	// OnClaimed, when not nil, is told of each job claimed: the claim's
	// latency, and how long the job had been queued (from the
	// updated_at the index read; zero when not read).
	OnClaimed func(latency, waited time.Duration)
	// OnClaimFailed, when not nil, is told of each claim that did not
	// take its job, by reason (ClaimFailure).
	OnClaimFailed func(reason string)
}

// WithIndex makes the store claim from a bounded index of incoming/
// instead of a listing per Claim (agentd's claims; see indexed.go).
func WithIndex(c IndexConfig) Option { return func(cf *config) { cf.index = &c } }

// fullListingEvery is the least time between two periodic listings of
// incoming/ while the index holds less than the queue: the periodic
// rescans in between list the hints alone. A job the events missed is
// then found within that time, or sooner if it has a hint; a listing of
// a million jobs costs about half a second of CPU.
const fullListingEvery = time.Minute

// indexed is the claim side of an indexed store.
type indexed struct {
	sp  *job.Spool
	cfg IndexConfig
	x   *index
	log zerolog.Logger

	mu      sync.Mutex
	started bool
	closed  bool
	stop    context.CancelFunc
	watch   *fsq.Watcher
	done    chan struct{} // closed when consume returns

	listed     chan struct{} // closed after the first full listing
	listedOnce sync.Once
	// lastListing: when consume last listed incoming/ in full (used by
	// consume alone).
	lastListing time.Time
}

var errClosed = errors.New("spool store closed")

func newIndexed(sp *job.Spool, c IndexConfig) *indexed {
	x := newIndex(sp)
	if c.Cap > 0 {
		x.cap = c.Cap
	}
	return &indexed{sp: sp, cfg: c, x: x, log: c.Log, done: make(chan struct{}), listed: make(chan struct{})}
}

// start starts the watch and its consumer once; false once closed.
func (ix *indexed) start() bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return false
	}
	if ix.started {
		return true
	}
	ix.started = true
	ctx, cancel := context.WithCancel(context.Background())
	ix.stop = cancel
	ix.watch = fsq.StartWatch(ctx, fsq.WatchConfig{
		Dirs: []string{ix.sp.StateDir(job.Queued)}, Rescan: ix.cfg.Rescan, NoNotify: ix.cfg.NoNotify,
		OnFallback: func(err error) { ix.log.Warn().Err(err).Msg("fsnotify unavailable; relying on periodic rescans") },
	})
	go func() {
		defer close(ix.done)
		ix.consume(ctx, ix.watch.Events)
	}()
	return true
}

// close stops the watch and waits for its consumer.
func (ix *indexed) close() {
	ix.mu.Lock()
	started, already := ix.started, ix.closed
	ix.closed = true
	ix.mu.Unlock()
	if !started || already {
		return
	}
	ix.stop()
	_ = ix.watch.Stop()
	<-ix.done
}

func (ix *indexed) consume(ctx context.Context, events <-chan fsq.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ix.x.refillReq: // the index dropped jobs and runs low
			ix.refill("low")
		case ev := <-events:
			switch {
			case ev.Rescan:
				ix.refill("rescan")
				ix.listedOnce.Do(func() { close(ix.listed) })
			case ev.Created:
				ix.x.add(ev.Name)
			case ev.Removed:
				ix.x.removed(ev.Name)
			}
		}
	}
}

// refill lists incoming/ into the index (see index.refill). Called by
// consume alone.
func (ix *indexed) refill(why string) {
	start := time.Now()
	hintsOnly := why == "rescan" && ix.x.partial() && start.Sub(ix.lastListing) < fullListingEvery
	n, err := ix.x.refill(hintsOnly)
	if err != nil {
		ix.log.Error().Err(err).Str("why", why).Msg("rescan incoming")
		return
	}
	if !hintsOnly {
		ix.lastListing = start
	}
	ix.log.Debug().Str("why", why).Bool("hints_only", hintsOnly).Int("taken", n).Int("held", ix.x.len()).Dur("took_ms", time.Since(start)).Msg("index refilled from a listing of incoming/")
}

// claim takes up to opts.Max of the index's best candidates of the kinds
// opts asks for, and claims them with job.Spool.Claim, concurrently when
// there are several (one barrier for all). A job someone else took, gone,
// refused (schema, status), quarantined or held by an operator's request
// is passed over: logged, counted (OnClaimFailed) and left out. A lost
// durability (fsq.ErrDurability) is returned with the claims taken.
func (ix *indexed) claim(ctx context.Context, h job.Holder, opts store.ClaimOptions) ([]store.Claim, error) {
	if !ix.start() {
		return nil, errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var runnable func(string) bool
	if len(opts.Kinds) > 0 {
		kinds := opts.Kinds
		runnable = func(kind string) bool { return slices.Contains(kinds, kind) }
	}
	ix.x.unparkRunnable(runnable) // kinds asked for again
	want := max(opts.Max, 1)
	var cands []cand
	next := func() {
		for len(cands) < want {
			c, ok := ix.x.tryNext(runnable, opts.PassedOver)
			if !ok {
				break
			}
			cands = append(cands, c)
		}
	}
	// The index learns of a job by its inotify event, a moment after it
	// is queued. So that a job queued before the call is neither missed
	// nor passed by a worse one, a claim on a small incoming/ lists it
	// first (a large one is refilled in the background, as the index
	// asks); a claim that found nothing before the first listing waits
	// for it.
	caught := false
	select {
	case <-ix.listed:
		ix.catchUp()
		caught = true
	default:
	}
	if next(); len(cands) == 0 && !caught {
		select {
		case <-ix.listed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		ix.catchUp()
		next()
	}
	if len(cands) == 0 {
		return nil, nil
	}
	got := make([]*job.Claimed, len(cands))
	errs := make([]error, len(cands))
	start := time.Now()
	one := func(i int) {
		c, err := ix.sp.Claim(cands[i].id, h)
		if err != nil {
			if errors.Is(err, fsq.ErrDurability) {
				errs[i] = err // the caller stops: nothing is durable any more
			} else {
				ix.claimFailed(cands[i].id, err)
			}
			return
		}
		ix.claimed(cands[i], start)
		ix.x.forget(cands[i].id, false)
		got[i] = c
	}
	if len(cands) == 1 {
		one(0)
	} else {
		var wg sync.WaitGroup
		for i := range cands {
			wg.Add(1)
			go func() { defer wg.Done(); one(i) }()
		}
		wg.Wait()
	}
	out := make([]store.Claim, 0, len(cands))
	for _, c := range got {
		if c != nil {
			out = append(out, &claim{c: c})
		}
	}
	for _, err := range errs {
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// catchUp lists a small incoming/ into the index (index.small), waking
// nobody unless it took a job. A listing that fails is logged as a
// rescan's; the claim goes on with what the index holds.
func (ix *indexed) catchUp() {
	if !ix.x.small() {
		return
	}
	if _, err := ix.x.refillSignal(false, false); err != nil {
		ix.log.Error().Err(err).Str("why", "claim").Msg("rescan incoming")
	}
}

// claimed counts a successful claim: its latency and how long the job had
// waited in incoming/ (since the updated_at the index read, i.e. when it
// was submitted, promoted, released or requeued).
func (ix *indexed) claimed(cd cand, start time.Time) {
	if ix.cfg.OnClaimed == nil {
		return
	}
	now := time.Now()
	var waited time.Duration
	if cd.queued != 0 {
		waited = now.Sub(time.Unix(0, cd.queued))
	}
	ix.cfg.OnClaimed(now.Sub(start), waited)
}

// ClaimFailure names the reason of a claim that did not take its job, for
// a counter of failed claims: locked, vanished, schema, state, corrupt or
// other.
func ClaimFailure(err error) string {
	switch {
	case errors.Is(err, fsq.ErrLocked):
		return "locked"
	case errors.Is(err, fsq.ErrVanished):
		return "vanished"
	case errors.Is(err, job.ErrSchema):
		return "schema"
	case errors.Is(err, job.ErrState):
		return "state"
	case errors.Is(err, job.ErrCorrupt):
		return "corrupt"
	}
	return "other"
}

// claimFailed logs and counts a claim of id that did not take it, and
// tells the index what became of the job.
func (ix *indexed) claimFailed(id string, err error) {
	if ix.cfg.OnClaimFailed != nil {
		ix.cfg.OnClaimFailed(ClaimFailure(err))
	}
	l := ix.log.With().Str("job_id", id).Logger()
	switch {
	case errors.Is(err, fsq.ErrLocked):
		l.Debug().Msg("claim lost: locked")
		ix.x.forget(id, true)
	case errors.Is(err, fsq.ErrVanished):
		l.Debug().Msg("claim lost: job gone")
		ix.x.forget(id, false)
	case errors.Is(err, job.ErrSchema):
		l.Error().Err(err).Msg("job not processed: unknown schema version; lock released, job left in incoming/")
		ix.x.refuse(id)
	case errors.Is(err, job.ErrState):
		l.Error().Err(err).Msg("job not processed: status is not queued; lock released")
		ix.x.refuse(id)
	case errors.Is(err, job.ErrCorrupt):
		l.Error().Err(err).Msg("job quarantined to corrupt/")
		ix.x.forget(id, false)
	case errors.Is(err, job.ErrControlled):
		l.Info().Err(err).Msg("job not run: an operator's request for its last attempt was applied")
		ix.x.forget(id, false)
	default:
		// Not the job's fault (a full disk, an I/O error): retried soon.
		l.Error().Err(err).Msg("claim failed; retrying shortly")
		ix.x.retryLater(id)
	}
}

// waitQueued waits until the index has news (a job added, a refill, a
// candidate left after a claim, Wake), timeout, or ctx's end.
func (ix *indexed) waitQueued(ctx context.Context, timeout time.Duration) (bool, error) {
	if !ix.start() {
		return false, errClosed
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ix.x.wake:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C:
		return false, nil
	}
}

// WaitQueued waits up to timeout for a job that may be claimable: on an
// indexed store, news of the index (a job arrived, a refill, a job left
// by a claim that took fewer than there are, Wake); otherwise it only
// waits. true: woken before timeout.
func (s *Store) WaitQueued(ctx context.Context, timeout time.Duration) (bool, error) {
	if s.ix != nil {
		return s.ix.waitQueued(ctx, timeout)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C:
		return false, nil
	}
}

// Wake wakes one WaitQueued of an indexed store (a kind its claims left
// aside is asked for again: the next Claim gives its jobs back).
func (s *Store) Wake() {
	if s.ix != nil {
		s.ix.x.signal()
	}
}

// Listed is closed once an indexed store has listed incoming/ in full
// for the first time (it starts its index if need be); at once on a store
// without an index, which lists at every Claim.
func (s *Store) Listed() <-chan struct{} {
	if s.ix == nil || !s.ix.start() {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.ix.listed
}

// Parked is how many queued jobs an indexed store's index holds aside,
// of kinds its last claims did not ask for (0 without an index).
func (s *Store) Parked() int {
	if s.ix == nil {
		return 0
	}
	return s.ix.x.parkedLen()
}
