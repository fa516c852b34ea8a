// Package frontier is the crawl frontier, run inside managerd: for every
// crawl of the spool it ingests the artifacts of finished URL jobs,
// normalizes, scopes and dedups the links they found, queues them per
// domain, and releases URLs as crawl.fetch jobs into incoming/ politely:
// round robin across domains, at most max_in_flight_per_domain jobs in
// flight per domain, releases to a domain spaced by its interval (delay,
// jitter, robots.txt Crawl-delay, Retry-After), breadth-first by depth
// then priority, within the crawl's budgets. It never fetches and never
// parses page bodies: robots.txt is fetched by crawl.robots jobs, which it
// releases before a domain's first URL, and evaluated from the stored
// copy.
//
// Jobs are reached through the job store only (Config.Store, a
// store.Store): the releases are submitted there, finished jobs are
// located and read there, cancels are moves and control requests there.
// The crawl's own files (crawl.json, queues, seen-set, domains, requests,
// bodies) are internal/crawl's, in the spool's crawls/.
//
// One frontier drives a crawl at a time: it holds crawls/<name>/frontier.lock
// (flock). Its state is on disk (internal/crawl), written in an order that
// makes every step safe to repeat after a crash: queue appends are
// fsynced before the domain files that count them, and a URL's job ID is
// deterministic, so releasing a URL again after a crash is refused by the
// job store and recognised as already done.
package frontier

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// Actor is the name the frontier acts under in job events and locks.
const Actor = "managerd/frontier"

// Config configures a Frontier.
type Config struct {
	// Spool is where the crawls' own files are (crawls/, the domain
	// registry); no job is reached through it.
	Spool *job.Spool
	// Store is the job store: every job the frontier submits, locates,
	// reads or cancels goes through it. It must offer store.Dirs (a
	// fetch's result is a file in its job's directory: the spool
	// store); store.FinishWatcher, when offered, wakes the frontier as
	// jobs finish, else it looks its jobs in flight up every Rescan.
	Store store.Store
	Log   zerolog.Logger
	// Rescan is the period of full rescans: crawls, and the location of
	// every job in flight (default 10s; fsnotify can drop events).
	Rescan time.Duration
	// Poll is the longest the loop sleeps: crawl.json changes (pause,
	// resume, cancel) and operator requests are seen within it (default
	// 200ms).
	Poll     time.Duration
	NoNotify bool
	// MaxReleasesPerStep bounds the URLs released in one step (default 256).
	MaxReleasesPerStep int
	// SeenCacheBytes bounds each crawl's seen-set cache (default 8 MiB).
	SeenCacheBytes int
	// DomainCache bounds the domain entities each crawl keeps in memory
	// (default DefaultDomainCache; domcache.go).
	DomainCache int
	// Rand returns a random int64 in [0, n) (jitter); nil: math/rand/v2.
	Rand func(n int64) int64
}

func (c *Config) defaults() {
	if c.Rescan <= 0 {
		c.Rescan = 10 * time.Second
	}
	if c.Poll <= 0 {
		c.Poll = 200 * time.Millisecond
	}
	if c.MaxReleasesPerStep <= 0 {
		c.MaxReleasesPerStep = 256
	}
	if c.Rand == nil {
		c.Rand = func(n int64) int64 { return rand.Int64N(n) }
	}
}

// Frontier drives the crawls of one spool.
type Frontier struct {
	cfg     Config
	log     zerolog.Logger
	drivers map[string]*driver
	// busy: crawls whose frontier.lock another process holds, by when
	// we last tried.
	busy map[string]time.Time
	// rediscover: crawls/ changed (a crawl was created).
	rediscover bool
	// domainCounts: domains by crawl and status, recounted from memory at
	// most once a second, read by metrics scrapes.
	domainCounts atomic.Pointer[map[string]map[string]int]
	pendingURLs  atomic.Pointer[map[string]int64] // pending.go
	lastCount    time.Time
	reg          *crawl.Registry // the spool's domain registry (registry.go)
	// regLeft: drivers stopped with registry writes not made yet, by
	// crawl; retried every pass until made (registry.go).
	regLeft map[string]*driver
	// jobs is cfg.Store, dirs the same store as store.Dirs (nil: the
	// store cannot run a crawl, Run refuses).
	jobs store.Store
	dirs store.Dirs
	// rescanOnCrawls: the job store sends no wake-ups (no
	// store.FinishWatcher, or NoNotify); the crawls/ watch's Rescans
	// look the jobs in flight up instead.
	rescanOnCrawls bool
	// ctx is the context of every job store call: not cancelled when
	// the frontier stops, so that a step under way (a release's submit,
	// an ingest's reads) finishes what it began.
	ctx context.Context
}

// DomainCounts returns, for each crawl this frontier is running now
// (running or paused; a done or cancelled crawl is no longer listed), how
// many of its domains are in each status (every status, zeros included).
// It reads a snapshot: safe from any goroutine, and as cheap with a
// million domains as with ten.
func (f *Frontier) DomainCounts() map[string]map[string]int {
	if m := f.domainCounts.Load(); m != nil {
		return *m
	}
	return map[string]map[string]int{}
}

func (f *Frontier) countDomains(now time.Time) {
	if now.Sub(f.lastCount) < time.Second {
		return
	}
	f.lastCount = now
	m := make(map[string]map[string]int, len(f.drivers))
	pending := make(map[string]int64, len(f.drivers))
	defer f.pendingURLs.Store(&pending)
	for name, d := range f.drivers {
		pending[name] = d.notePending() // pending.go
		c := make(map[string]int, len(crawl.DomainStatuses))
		for _, st := range crawl.DomainStatuses {
			c[string(st)] = 0
		}
		for st, n := range d.status { // domcache.go keeps the counts
			c[string(st)] = n
		}
		m[name] = c
	}
	f.domainCounts.Store(&m)
}

// New returns a frontier.
func New(cfg Config) *Frontier {
	cfg.defaults()
	reg := crawl.OpenRegistry(cfg.Spool)
	reg.Wait = RegistryLockWait // registry.go: a step never waits long on the registry
	f := &Frontier{cfg: cfg, log: cfg.Log, drivers: map[string]*driver{}, busy: map[string]time.Time{}, reg: reg, regLeft: map[string]*driver{},
		jobs: cfg.Store, ctx: context.Background()}
	f.dirs, _ = cfg.Store.(store.Dirs)
	return f
}

// ErrNoDirs: the job store keeps no job in a directory of this host (a
// database store), where a crawl fetch leaves its result.
var ErrNoDirs = errors.New("the crawl frontier runs on a spool store only: a fetch's result is a file in its job's directory, which this job store does not offer")

// EventCoalesce is how long the frontier lets directory events gather
// before it reads them (fsq.WatchConfig.Coalesce): a finished page is
// ingested at most this much later, and a busy spool (every job that
// succeeds makes an event here, crawl or not) wakes it about 100 times a
// second instead of once per job.
const EventCoalesce = 10 * time.Millisecond

// Run drives the crawls until ctx is done, then releases its locks. It
// returns an error only if the spool's crawls/ cannot be created, or if
// the job store cannot run a crawl (ErrNoDirs).
func (f *Frontier) Run(ctx context.Context) error {
	if f.jobs == nil || f.dirs == nil {
		return ErrNoDirs
	}
	f.ctx = context.WithoutCancel(ctx)
	if err := fsq.MkdirDurable(f.cfg.Spool.Path(crawl.Dir)); err != nil {
		return err
	}
	f.buildRegistry(time.Now().UTC()) // registry.go
	defer func() {
		for name, d := range f.drivers {
			d.close()
			delete(f.drivers, name)
		}
		f.retryRegistry(time.Now().UTC()) // a last try; a next start compares (registry.go)
	}()
	var fallback sync.Once // one line, whichever watch finds out first
	onFallback := func(err error) {
		fallback.Do(func() { f.log.Warn().Err(err).Msg("fsnotify unavailable; relying on rescans") })
	}
	// The job store wakes the frontier as jobs finish, when it can (the
	// spool store: every finished job lands in succeeded/ or killed/);
	// the wake-ups are read in batches (EventCoalesce), and each batch
	// of finished pages is ingested in one pass. Its Rescans, and
	// without a watcher the crawls/ watch's, look every job in flight
	// up again through the store.
	var finished <-chan store.Finished
	if fw, ok := f.jobs.(store.FinishWatcher); ok && !f.cfg.NoNotify {
		var stop func()
		finished, stop = fw.WatchFinished(ctx, store.WatchOptions{Rescan: f.cfg.Rescan, Coalesce: EventCoalesce, OnFallback: onFallback})
		defer stop()
	}
	f.rescanOnCrawls = finished == nil
	wcfg := fsq.WatchConfig{Rescan: f.cfg.Rescan, NoNotify: f.cfg.NoNotify, Dirs: []string{f.cfg.Spool.Path(crawl.Dir)}, Coalesce: EventCoalesce,
		OnFallback: onFallback}
	watch := fsq.StartWatch(ctx, wcfg)
	defer watch.Stop()

	timer := time.NewTimer(0)
	defer timer.Stop()
	lastDiscover := time.Time{}
	for {
		now := time.Now()
		if f.rediscover || now.Sub(lastDiscover) >= time.Second {
			f.discover(now)
			lastDiscover, f.rediscover = now, false
		}
		wake := now.Add(f.cfg.Poll)
		for name, d := range f.drivers {
			next, keep := d.step(ctx)
			if !keep {
				d.close()
				delete(f.drivers, name)
				f.leaveRegistry(name, d) // registry.go
				continue
			}
			if next.Before(wake) {
				wake = next
			}
		}
		f.countDomains(now)
		f.retryRegistry(now.UTC()) // registry.go
		if ctx.Err() != nil {
			return nil
		}
		sleep := max(time.Until(wake), time.Millisecond)
		timer.Reset(sleep)
		select {
		case <-ctx.Done():
			return nil
		case ev := <-watch.Events:
			f.route(ev)
			finished = f.drain(watch.Events, finished)
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case fin, ok := <-finished:
			if !ok {
				finished = nil // stopped with ctx
				continue
			}
			f.finish(fin)
			finished = f.drain(watch.Events, finished)
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
	}
}

// drain takes whatever else is ready before stepping (one step ingests a
// batch); it returns finished, nil once closed.
func (f *Frontier) drain(crawls <-chan fsq.Event, finished <-chan store.Finished) <-chan store.Finished {
	for {
		select {
		case ev := <-crawls:
			f.route(ev)
		case fin, ok := <-finished:
			if !ok {
				return nil
			}
			f.finish(fin)
		default:
			return finished
		}
	}
}

// route handles an event of crawls/: a crawl created, or a rescan (which,
// when the job store sends no wake-ups, looks every job in flight up
// again too).
func (f *Frontier) route(ev fsq.Event) {
	if ev.Rescan {
		f.rediscover = true
		if f.rescanOnCrawls {
			f.rescanAll()
		}
		return
	}
	if ev.Created {
		f.rediscover = true
	}
}

// finish hands a job store's wake-up to the driver of the job's crawl.
func (f *Frontier) finish(fin store.Finished) {
	if fin.Rescan {
		f.rescanAll()
		return
	}
	_, name, ok := crawl.ParseJobID(fin.ID)
	if !ok {
		return
	}
	if d := f.drivers[name]; d != nil {
		d.noteFinished(fin.ID, fin.State)
	}
}

// rescanAll looks every crawl's jobs in flight up again.
func (f *Frontier) rescanAll() {
	for _, d := range f.drivers {
		d.rescanInFlight()
	}
}

// discover starts a driver for every crawl that needs one and that no
// other process drives.
func (f *Frontier) discover(now time.Time) {
	names, err := crawl.List(f.cfg.Spool)
	if err != nil {
		f.log.Error().Err(err).Msg("list crawls")
		return
	}
	for _, name := range names {
		if f.drivers[name] != nil {
			continue
		}
		if t, ok := f.busy[name]; ok && now.Sub(t) < 2*time.Second {
			continue
		}
		st, err := crawl.Open(f.cfg.Spool, name)
		if err != nil {
			continue
		}
		c, err := st.Load()
		if err != nil {
			if !errors.Is(err, crawl.ErrNoCrawl) {
				f.log.Error().Err(err).Str("crawl", name).Msg("unreadable crawl.json")
				f.busy[name] = now
			}
			continue
		}
		if c.State == crawl.Done || (c.State == crawl.Cancelled && c.FinishedAt != nil) {
			continue
		}
		d, err := openDriver(f, st)
		if err != nil {
			if errors.Is(err, crawl.ErrBusy) {
				f.log.Debug().Str("crawl", name).Msg("another frontier drives this crawl")
			} else {
				f.log.Error().Err(err).Str("crawl", name).Msg("cannot drive crawl")
			}
			f.busy[name] = now
			continue
		}
		delete(f.busy, name)
		delete(f.regLeft, name) // the new driver compares its domains with the registry
		f.drivers[name] = d
	}
}

// Drivers is the number of crawls this frontier drives now.
func (f *Frontier) Drivers() int { return len(f.drivers) }

func ownerContent() []byte {
	host, _ := os.Hostname()
	return []byte(strings.Join([]string{"actor=" + Actor, "host=" + host, "pid=" + strconv.Itoa(os.Getpid()), "since=" + time.Now().UTC().Format(time.RFC3339)}, "\n") + "\n")
}
