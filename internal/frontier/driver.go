package frontier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/crawl/seenset"
	"github.com/farro-dev/farro/internal/robots"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// dom is a domain as the driver keeps it: the persisted entity plus what
// is derived from it.
type dom struct {
	d         *crawl.Domain
	parsed    map[string]*robots.Robots // by origin
	mkdirDone bool
	// head is a read-ahead of the head segment.
	headFile   string
	headOffset int64
	head       []crawl.Entry
	headEnds   []int64
}

// segKey names a segment of a domain for buffered appends.
type segKey struct {
	domain, file string
}

// driver drives one crawl: it holds the crawl's frontier lock.
type driver struct {
	f        *Frontier
	st       *crawl.Store
	log      zerolog.Logger
	lock     *crawl.Flock
	cfg      *crawl.Crawl
	cfgStamp string
	scoper   *crawl.Scoper
	filter   *crawl.URLFilter // nil: no URL filter
	seen     *seenset.Set
	deep     *seenset.Set
	fr       *crawl.Frontier
	frDirty  bool
	frSaved  time.Time

	domIndex                          // the domains: summaries and cached entities (domcache.go)
	inflight map[string]string        // job id -> domain
	finished map[string]job.State     // terminal jobs to ingest ("" : not found)
	located  map[string]job.State     // releases that found their job finished (flushReleases)
	appends  map[segKey][]crawl.Entry // discovered, not yet appended
	pending  []pendingRelease         // released this pass, not yet submitted
	outcomes []crawl.Outcome          // not yet appended to outcomes.jsonl
	dirty    map[string]bool          // domains to write
	asked    map[string]time.Time     // cancel requests made, by job id
	requests []string                 // request files applied, to remove after persisting
	kept     map[string]bool          // request files read and left for later (refresh.go)
	rr       uint64
	lastScan time.Time
	closed   bool
	// Running sums of PagesReleased and of this run's RunReleased.
	released, runReleased int64
	releasedRun           int

	sitemapLines []crawl.SitemapLine // not yet appended to sitemaps.jsonl (sitemap.go)

	// Link counters (counts.go).
	tally      crawl.LinkTally            // the job being ingested
	tallies    []crawl.LinkTally          // not yet appended to links.jsonl
	tallied    map[string]crawl.LinkTally // lines in links.jsonl of jobs that may be ingested again
	linkSums   crawl.LinkTally            // the last line of every job, added up
	discovered int64                      // sum of the domains' PagesDiscovered
	rereading  map[string]bool            // robots jobs released to read sitemaps before a refresh

	// The domain registry (registry.go): domains to write back (true: with
	// their status) and whose counters changed, and when.
	regDirty, regStale   map[string]bool
	regSaved, regChecked time.Time
	regErrAt             time.Time // last "cannot write the domain registry" line
	regVerify            []string  // domains whose write-back a crash may have lost
}

func openDriver(f *Frontier, st *crawl.Store) (*driver, error) {
	lock, err := crawl.TryFlock(st.Path(crawl.FrontierLock))
	if err != nil {
		return nil, err
	}
	lock.SetContent(ownerContent())
	d := &driver{
		f: f, st: st, lock: lock,
		log:      f.log.With().Str("crawl", st.Name).Logger(),
		domIndex: newDomIndex(f.cfg.DomainCache), inflight: map[string]string{},
		finished: map[string]job.State{}, located: map[string]job.State{}, appends: map[segKey][]crawl.Entry{}, dirty: map[string]bool{},
		asked: map[string]time.Time{}, rereading: map[string]bool{},
		regDirty: map[string]bool{}, regStale: map[string]bool{}, regSaved: time.Now(),
	}
	if err := d.load(); err != nil {
		lock.Unlock()
		return nil, err
	}
	d.log.Info().Str("state", string(d.cfg.State)).Int("domains", len(d.sums)).Int("in_flight", len(d.inflight)).
		Int64("pending", d.pendingTotal()).Msg("driving crawl")
	return d, nil
}

func (d *driver) close() {
	if d.closed {
		return
	}
	d.closed = true
	d.notePending()         // pending.go
	d.frSaved = time.Time{} // write frontier.json now if it changed
	_ = d.persist()
	d.flushRegistry(time.Now().UTC(), true)
	d.lock.Unlock()
}

// load rebuilds the driver's memory from disk, repairing what a crash
// may have left half-written.
func (d *driver) load() error {
	cfg, stamp, err := d.loadConfig()
	if err != nil {
		return err
	}
	if err := d.setConfig(cfg, stamp); err != nil {
		return err
	}
	for _, sub := range []string{crawl.DomainsDir, crawl.QueuesDir, crawl.RequestsDir, crawl.BodiesDir} {
		if err := fsq.MkdirDurable(d.st.Path(sub)); err != nil {
			return err
		}
	}
	if d.seen, err = seenset.Open(d.st.Path(crawl.SeenDir), d.f.cfg.SeenCacheBytes); err != nil {
		return err
	}
	if d.deep, err = seenset.Open(d.st.Path(crawl.DeepDir), 1<<20); err != nil {
		return err
	}
	if d.fr, err = d.st.LoadFrontier(); err != nil {
		return err
	}
	// One streaming pass over the domain files builds the summaries; the
	// entities stay in the cache as long as it has room (domcache.go).
	discovered := int64(0)
	if err := d.st.ScanDomains(func(dd *crawl.Domain) error {
		if d.known(dd.Domain) {
			d.log.Error().Str("domain", dd.Domain).Msg("a second domain file names this domain; ignored")
			return nil
		}
		dm := &dom{d: dd, parsed: map[string]*robots.Robots{}}
		d.cache[dd.Domain] = d.lru.PushFront(dm)
		return d.loadDomain(dm, &discovered)
	}); err != nil {
		return err
	}
	// Queue directories hold the truth about appends: a domain created
	// just before a crash has no entity yet.
	qdirs, err := readDirNames(d.st.Path(crawl.QueuesDir))
	if err != nil {
		return err
	}
	for _, qn := range qdirs {
		name, ok := crawl.UnescapeName(qn)
		if !ok || d.known(name) {
			continue
		}
		_, parent, err := crawl.DomainOf("http://" + name + "/")
		if err != nil {
			continue
		}
		dm := &dom{d: crawl.NewDomain(name, parent, time.Now().UTC()), parsed: map[string]*robots.Robots{}}
		d.dirty[name] = true
		d.adopt(dm, dm.d.FirstSeenAt) // registry.go
		d.cache[name] = d.lru.PushFront(dm)
		if err := d.loadDomain(dm, &discovered); err != nil {
			return err
		}
	}
	sort.Strings(d.regVerify)
	d.recount()
	d.settleImagesStored() // images.go
	if err := d.loadCounts(discovered); err != nil {
		return err
	}
	if !d.fr.Seeded {
		now := time.Now().UTC()
		d.beginTally(crawl.SeedsTallyID)
		for _, s := range d.cfg.Seeds {
			d.discoverSeed(s, now) // seeds.go
		}
		d.endTally()
		if err := d.flushAppends(); err != nil {
			return err
		}
		if err := d.seen.Flush(); err != nil {
			return err
		}
		if err := d.persist(); err != nil {
			return err
		}
		d.fr.Seeded, d.fr.Tallied = true, true
		if err := d.st.WriteFrontier(d.fr); err != nil {
			return err
		}
	}
	d.rescanInFlight()
	return nil
}

// loadDomain repairs a domain read at start from its queue segments
// (appends a crash left uncounted), notes its jobs in flight and its
// summary, and keeps the cache within its bound.
func (d *driver) loadDomain(dm *dom, discovered *int64) error {
	name := dm.d.Domain
	files, err := readDirNames(d.st.QueueDir(name))
	if err != nil {
		return err
	}
	for _, fn := range files {
		var depth, prio int
		if _, err := fmt.Sscanf(fn, "%d_%d.jsonl", &depth, &prio); err != nil {
			continue
		}
		dm.mkdirDone = true
		seg := dm.d.Segment(depth, prio)
		path := filepath.Join(d.st.QueueDir(name), fn)
		size, lines, err := crawl.RepairTail(path, seg.Size)
		if err != nil {
			return err
		}
		if size != seg.Size || lines > 0 {
			// Appended after the entity was last written: the step
			// that appended them may have died before its seen-set
			// flush, and the job that found them is still in flight
			// (it will be ingested again). Mark them seen now, or they
			// would be queued twice.
			es, _, err := crawl.ReadEntries(path, seg.Size, int(lines)+1)
			if err != nil {
				return err
			}
			found := int64(0)
			for _, e := range es {
				if e.URL != "" {
					d.seen.Add(crawl.URLKey(e.URL))
					if e.Discovery() {
						found++
					}
				}
				if e.Round > dm.d.Round {
					// A refresh appended its entries and died before
					// the domain's new round was written: adopt it
					// (control.go, startRefresh).
					d.adoptRound(dm, e.Round, e.At)
				}
			}
			// Only first queueings are discoveries: retries, refresh
			// revisits and failed releases put back are not.
			seg.Size, seg.Count = size, seg.Count+lines
			dm.d.PagesDiscovered += found
			d.dirty[name] = true
		}
	}
	*discovered += dm.d.PagesDiscovered
	d.addImagesStored(dm.d) // images.go
	for _, fl := range dm.d.InFlight {
		d.inflight[fl.ID] = name
	}
	d.sync(dm)
	d.regVerify = append(d.regVerify, name) // registry.go
	if d.lru.Len() <= d.cacheCap {
		return nil
	}
	// The cache is full: write what the repair changed (after the
	// seen-set that the repair added to) and evict.
	if len(d.dirty) > 0 {
		if err := d.seen.Flush(); err != nil {
			return err
		}
		if err := d.writeDirty(); err != nil {
			return err
		}
	}
	d.trimCache()
	return nil
}

// loadConfig reads crawl.json and the stamp of the version read. The
// stamp is taken before the read: a write landing in between leaves a
// stamp older than the content, which costs one extra reload; a stamp
// taken after the read could name a version never read, and that change
// would be missed for good.
func (d *driver) loadConfig() (*crawl.Crawl, string, error) {
	stamp := d.stamp()
	cfg, err := d.st.Load()
	return cfg, stamp, err
}

// setConfig adopts cfg, read when crawl.json had the given stamp ("" to
// read it again at the next step).
func (d *driver) setConfig(cfg *crawl.Crawl, stamp string) error {
	sc, err := crawl.NewScoper(cfg)
	if err != nil {
		return err
	}
	uf, err := crawl.NewURLFilter(cfg.Filters, cfg.Normalize.Options())
	if err != nil {
		return err
	}
	prev := d.cfg
	d.cfg, d.scoper, d.filter = cfg, sc, uf
	d.cfgStamp = stamp
	if prev != nil && (prev.MaxInFlightPerDomain != cfg.MaxInFlightPerDomain || prev.MaxPagesPerDomain != cfg.MaxPagesPerDomain ||
		prev.MaxPagesPerDomainPerRun != cfg.MaxPagesPerDomainPerRun || prev.Run != cfg.Run) {
		d.replaceAll() // domcache.go: the limits that place the summaries changed
	}
	return nil
}

// stamp identifies the current crawl.json version cheaply.
func (d *driver) stamp() string {
	fi, err := os.Stat(d.st.Path(crawl.ConfigFile))
	if err != nil {
		return ""
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st != nil {
		return fmt.Sprint(fi.ModTime().UnixNano(), fi.Size(), st.Ino)
	}
	return fmt.Sprint(fi.ModTime().UnixNano(), fi.Size())
}

// reloadConfig re-reads crawl.json if it changed. It returns false when the
// crawl is gone.
func (d *driver) reloadConfig() bool {
	s := d.stamp()
	if s == "" {
		if !d.st.Exists() {
			return false
		}
		return true
	}
	if s == d.cfgStamp {
		return true
	}
	cfg, s, err := d.loadConfig()
	if err != nil {
		if errors.Is(err, crawl.ErrNoCrawl) {
			return false
		}
		d.log.Error().Err(err).Msg("unreadable crawl.json; keeping the previous one")
		d.cfgStamp = s
		return true
	}
	if cfg.State != d.cfg.State {
		d.log.Info().Str("from", string(d.cfg.State)).Str("to", string(cfg.State)).Str("reason", cfg.StateReason).Msg("crawl state changed")
	}
	if err := d.setConfig(cfg, s); err != nil {
		d.log.Error().Err(err).Msg("invalid crawl.json; keeping the previous one")
		d.cfgStamp = s
	}
	return true
}

// step does everything that can be done now and says when to come back.
func (d *driver) step(ctx context.Context) (next time.Time, keep bool) {
	now := time.Now().UTC()
	next = now.Add(d.f.cfg.Poll)
	if !d.reloadConfig() {
		d.log.Warn().Msg("crawl directory gone; stopping")
		return next, false
	}
	if now.Sub(d.lastScan) >= d.f.cfg.Rescan {
		d.rescanInFlight()
	}
	d.applyRequests(now)
	d.ingestFinished(now)
	if err := d.flushAppends(); err != nil {
		d.log.Error().Err(err).Msg("cannot append to queues; retrying")
		return now.Add(time.Second), true
	}
	if err := d.seen.Flush(); err != nil {
		d.log.Error().Err(err).Msg("seen-set")
	}
	if err := d.deep.Flush(); err != nil {
		d.log.Error().Err(err).Msg("deep-set")
	}
	d.recheckHeld(now) // registry.go
	switch d.cfg.State {
	case crawl.Running:
		d.releasePass(ctx, now)
	case crawl.Cancelled:
		d.cancelInFlight(now)
	}
	d.settleDomains(now)
	if err := d.persist(); err != nil {
		d.log.Error().Err(err).Msg("cannot persist frontier state; retrying")
		return now.Add(time.Second), true
	}
	keep = d.lifecycle(now)
	if w, ok := d.nextWake(now); ok && w.Before(next) {
		next = w
	}
	return next, keep
}

// lifecycle moves the crawl to done, paused or finished-cancelled when it
// has nothing left to do; false means the driver can stop.
func (d *driver) lifecycle(now time.Time) bool {
	switch d.cfg.State {
	case crawl.Done:
		return false
	case crawl.Cancelled:
		if len(d.inflight) == 0 {
			if d.cfg.FinishedAt == nil {
				if !d.saveFrontier() {
					return true
				}
				d.updateCrawl(func(c *crawl.Crawl) error {
					if c.State != crawl.Cancelled {
						return errChanged
					}
					t := now
					c.FinishedAt = &t
					return nil
				})
			}
			return false
		}
		return true
	case crawl.Paused:
		return true
	}
	// Running.
	if d.runBudgetReached() {
		d.setState(crawl.Running, crawl.Paused, fmt.Sprintf("run budget reached (max_pages_per_run %d); resume to start a new run", d.cfg.MaxPagesPerRun))
		return true
	}
	if len(d.inflight) > 0 {
		return true
	}
	work, runBlocked := d.remaining(now)
	if work {
		return true
	}
	if runBlocked {
		d.setState(crawl.Running, crawl.Paused, "run budget of every remaining domain reached (max_pages_per_domain_per_run); resume to start a new run")
		return true
	}
	reason := "nothing left to fetch"
	if d.cfg.MaxPages > 0 && d.totalReleased() >= d.cfg.MaxPages {
		reason = fmt.Sprintf("max_pages (%d) reached", d.cfg.MaxPages)
	} else if n := d.pendingTotal(); n > 0 {
		reason = fmt.Sprintf("nothing left to fetch; %d URLs wait in domains given up or over their budget", n)
	}
	d.settleBudget(now) // budget.go
	if err := d.persist(); err != nil {
		d.log.Error().Err(err).Msg("cannot persist frontier state; retrying")
		return true
	}
	// frontier.json before crawl.json says done: no frontier starts
	// for a done crawl to rebuild its counters.
	if !d.saveFrontier() {
		return true
	}
	if d.setDone(reason) {
		d.log.Info().Int64("released", d.totalReleased()).Str("reason", reason).Msg("crawl done")
		return false
	}
	return true
}

var errChanged = errors.New("crawl state changed meanwhile")

var errDomainName = errors.New("the domain file names another domain")

func (d *driver) setState(from, to crawl.State, reason string) bool {
	ok := d.updateCrawl(func(c *crawl.Crawl) error {
		if c.State != from {
			return errChanged
		}
		c.State, c.StateReason = to, reason
		if to == crawl.Done {
			t := time.Now().UTC()
			c.FinishedAt = &t
		}
		return nil
	})
	if ok {
		d.log.Info().Str("from", string(from)).Str("to", string(to)).Str("reason", reason).Msg("crawl state changed")
	}
	return ok
}

func (d *driver) updateCrawl(fn func(c *crawl.Crawl) error) bool {
	c, err := d.st.Update(fn)
	if err != nil {
		if !errors.Is(err, errChanged) {
			d.log.Error().Err(err).Msg("cannot update crawl.json")
		}
		if cfg, stamp, lerr := d.loadConfig(); lerr == nil {
			_ = d.setConfig(cfg, stamp)
		}
		return false
	}
	_ = d.setConfig(c, "")
	return true
}

// remaining tells whether some domain still has URLs it may release now
// or later in this run (work), and whether some are held back only by a
// per-run budget (runBlocked).
func (d *driver) remaining(now time.Time) (work, runBlocked bool) {
	if d.cfg.MaxPages > 0 && d.totalReleased() >= d.cfg.MaxPages {
		return false, false
	}
	// Ready (but not only to record a budget) or waiting for its jobs in
	// flight: work; held back by its per-run budget only: runBlocked
	// (domcache.go places them).
	if len(d.ready)-d.overN+d.busyN > 0 {
		return true, false
	}
	return false, d.runN > 0
}

// gaveUp: blocked or unreachable with no retry planned.
func gaveUp(dd *crawl.Domain) bool {
	return (dd.Status == crawl.DomainBlocked || dd.Status == crawl.DomainUnreachable) && dd.NextCrawlAfter == nil
}

func runReleased(dd *crawl.Domain, run int) int64 {
	if dd.Run != run {
		return 0
	}
	return dd.RunReleased
}

// totalReleased and runReleasedTotal are kept as running sums (budgets
// are checked at every release); recount rebuilds them.
func (d *driver) totalReleased() int64 { return d.released }

func (d *driver) runReleasedTotal() int64 {
	if d.releasedRun != d.cfg.Run {
		d.recount()
	}
	return d.runReleased
}

func (d *driver) recount() {
	d.released, d.runReleased, d.releasedRun = 0, 0, d.cfg.Run
	for _, s := range d.sums {
		d.released += s.pagesReleased
		if s.run == d.cfg.Run {
			d.runReleased += s.runReleased
		}
	}
}

func (d *driver) runBudgetReached() bool {
	return d.cfg.MaxPagesPerRun > 0 && d.runReleasedTotal() >= d.cfg.MaxPagesPerRun
}

func (d *driver) pendingTotal() int64 { return d.pendingN }

// nextWake is the earliest time a domain with pending URLs waits for (its
// interval or cooldown ending). Domains waiting for their jobs in flight
// are woken by the jobs' completion events instead.
func (d *driver) nextWake(now time.Time) (time.Time, bool) {
	if d.cfg.State != crawl.Running {
		return time.Time{}, false
	}
	return d.nextReady(now) // domcache.go
}

// refreshWork brings dm's summary up to date (domcache.go).
func (d *driver) refreshWork(dm *dom) { d.sync(dm) }

// domain returns the domain named name, creating a pending one (nil: its
// file is unreadable).
func (d *driver) domain(name, parent string, now time.Time) *dom {
	if d.known(name) {
		return d.get(name)
	}
	dm := &dom{d: crawl.NewDomain(name, parent, now), parsed: map[string]*robots.Robots{}}
	d.dirty[name] = true
	d.log.Info().Str("domain", name).Str("parent_domain", parent).Msg("new domain")
	d.adopt(dm, now) // registry.go
	d.addNew(dm)
	return dm
}

// transition changes a domain's status, logging it; an illegal transition
// is refused and logged.
func (d *driver) transition(dm *dom, to crawl.DomainStatus, reason, detail string) {
	from := dm.d.Status
	if from == to && dm.d.Reason == reason {
		return
	}
	if err := dm.d.SetStatus(to, reason, detail); err != nil {
		d.log.Error().Err(err).Str("domain", dm.d.Domain).Msg("domain transition refused")
		return
	}
	d.dirty[dm.d.Domain] = true
	d.noteRegistry(dm.d.Domain) // registry.go
	if from != to {
		ev := d.log.Info()
		if to == crawl.DomainBlocked || to == crawl.DomainUnreachable {
			ev = d.log.Warn()
		}
		ev.Str("domain", dm.d.Domain).Str("reason", reason).Str("detail", detail).
			Dict("event", zerolog.Dict().Str("type", "domain_transition").Str("from", string(from)).Str("to", string(to))).
			Msg("domain status changed")
	}
}

// settleDomains marks finished domains exhausted.
func (d *driver) settleDomains(now time.Time) {
	for name := range d.dirty {
		dm := d.cached(name)
		if dm == nil {
			continue
		}
		dd := dm.d
		if dd.Pending() == 0 && len(dd.InFlight) == 0 {
			d.settleExhausted(dm) // depth.go
		}
		dd.UpdatedAt = now
	}
}

// persist appends the outcome lines and writes the changed domains, then
// removes the operator requests applied.
func (d *driver) persist() error {
	if err := d.flushSitemapLines(); err != nil {
		return err
	}
	if err := d.flushTallies(); err != nil {
		return err
	}
	if len(d.outcomes) > 0 {
		if err := appendJSONLines(d.st.Path(crawl.OutcomesFile), d.outcomes); err != nil {
			return err
		}
		d.outcomes = d.outcomes[:0]
	}
	if err := d.writeDirty(); err != nil {
		return err
	}
	// The registry after the crawl's own files: the crawl's state is the
	// truth, written back (again, after a crash) from it.
	d.flushRegistry(time.Now().UTC(), false)
	d.trimCache() // domcache.go: what changed is written
	for _, r := range d.requests {
		_ = os.Remove(r)
	}
	d.requests = d.requests[:0]
	if d.frDirty && time.Since(d.frSaved) >= time.Second {
		if err := d.st.WriteFrontier(d.fr); err == nil {
			d.frDirty, d.frSaved = false, time.Now()
		}
	}
	return nil
}

// writeDirty writes the changed domains (their summaries brought up to
// date first), then their directory.
func (d *driver) writeDirty() error {
	if len(d.dirty) == 0 {
		return nil
	}
	names := make([]string, 0, len(d.dirty))
	for n := range d.dirty {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		dm := d.cached(n)
		if dm == nil {
			delete(d.dirty, n)
			continue
		}
		d.sync(dm)
		if err := d.st.WriteDomain(dm.d, false); err != nil {
			return err
		}
		delete(d.dirty, n)
		d.regStale[n] = true
	}
	return fsq.SyncDir(d.st.Path(crawl.DomainsDir))
}

// cached returns the entity of a domain if it is in the cache.
func (d *driver) cached(name string) *dom {
	if el := d.cache[name]; el != nil {
		return el.Value.(*dom)
	}
	return nil
}

// saveFrontier writes frontier.json now if it changed.
func (d *driver) saveFrontier() bool {
	if !d.frDirty {
		return true
	}
	if err := d.st.WriteFrontier(d.fr); err != nil {
		d.log.Error().Err(err).Msg("cannot write frontier.json; retrying")
		return false
	}
	d.frDirty, d.frSaved = false, time.Now()
	return true
}

// appendJSONLines appends one JSON line per item to path in one write,
// fsynced, and the directory too when it creates the file (fsq.AppendLine):
// outcomes.jsonl and sitemaps.jsonl.
func appendJSONLines[T any](path string, items []T) error {
	var b bytes.Buffer
	for i := range items {
		line, err := jsonLine(&items[i])
		if err != nil {
			return err
		}
		b.Write(line)
	}
	return fsq.AppendLine(path, bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

func readDirNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); n != "" && n[0] != '.' {
			out = append(out, n)
		}
	}
	return out, nil
}
