package frontier

import (
	"container/heap"
	"container/list"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/robots"
)

// Domains in bounded memory (docs/CRAWL.md, "Domains in memory"). The
// driver keeps a compact summary of every domain of its crawl (what
// eligibility, the candidate order and the crawl's totals need), and the
// full entities (queue cursors, robots.txt cache, counters, flights) in an
// LRU cache of at most Config.DomainCache entries, read from
// domains/<d>.json when a release, an ingest or a request needs one.
//
// A summary is placed by what holds its domain back: ready (in a heap
// ordered by the time it may release next: max(next_release_at,
// next_crawl_after)), busy (its in-flight cap reached: a job's completion
// re-places it), run (its per-run budget reached: a new run re-places
// it), held (for the registry: recheckHeld looks at these only) or none
// (nothing pending, given up, per-domain budget reached). A release pass
// visits the ready summaries whose time has come and loads only the
// entities it releases from; the exact check (eligible) runs on the
// entity.
//
// Every change to an entity marks it dirty (it is to be written); the
// summary of a dirty domain is brought up to date before a release pass
// and when it is written (persist), and at once by refreshWork. A dirty
// entity, or one with discoveries not yet appended, is never evicted:
// the cache is trimmed after persist has written the changed domains,
// never in the middle of a step, so a *dom a step holds stays the one
// entity of its domain.

// DefaultDomainCache is the default bound of the entity cache of each
// crawl (Config.DomainCache).
const DefaultDomainCache = 10000

// Where a summary is placed.
const (
	placeNone = iota
	placeReady
	placeBusy
	placeRun
	placeHeld
)

// summary is what the driver keeps in memory of every domain.
type summary struct {
	name          string
	in            crawl.PriorityInputs // status, pending, score inputs
	readyAt       time.Time            // max(next_release_at, next_crawl_after); zero: none
	inflight      int
	pagesReleased int64
	runReleased   int64
	run           int
	held, gaveUp  bool
	regHold       bool   // held for the registry in its status (recheckHeld)
	reason        string // the status\'s reason code (the registry\'s verification)
	budgetMarked  bool   // reason budget recorded (eligible)
	broken        bool   // entity unreadable: left alone
	lastServed    uint64 // round-robin order among equals
	place         int8
	over          bool // ready though over its per-domain budget (to be marked)
	idx           int  // in the ready heap
}

// readyHeap orders the ready summaries by readyAt.
type readyHeap []*summary

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].readyAt.Before(h[j].readyAt) }
func (h readyHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *readyHeap) Push(x any) {
	s := x.(*summary)
	s.idx = len(*h)
	*h = append(*h, s)
}
func (h *readyHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.idx = -1
	return s
}

// domIndex is the driver's memory of its domains.
type domIndex struct {
	sums     map[string]*summary
	ready    readyHeap
	held     map[string]*summary // held for the registry, with URLs pending
	busyN    int                 // placed busy
	runN     int                 // placed run
	overN    int                 // ready and over the per-domain budget, not marked yet
	pendingN int64               // the domains' pending URLs
	status   map[crawl.DomainStatus]int

	imagesStored map[string]int64 // page domain -> images stored for it (images.go)

	cache    map[string]*list.Element // of *dom
	lru      *list.List
	cacheCap int

	// Test hooks: entities read from disk, summaries visited by release
	// passes.
	loads, visits int
}

func newDomIndex(capacity int) domIndex {
	if capacity <= 0 {
		capacity = DefaultDomainCache
	}
	return domIndex{sums: map[string]*summary{}, held: map[string]*summary{}, status: map[crawl.DomainStatus]int{}, imagesStored: map[string]int64{},
		cache: map[string]*list.Element{}, lru: list.New(), cacheCap: capacity}
}

// known tells whether the crawl knows the domain.
func (d *driver) known(name string) bool { return d.sums[name] != nil }

// get returns the entity of a known domain, from the cache or read from
// disk; nil for an unknown domain or an unreadable file (logged once).
func (d *driver) get(name string) *dom {
	if el := d.cache[name]; el != nil {
		d.lru.MoveToFront(el)
		return el.Value.(*dom)
	}
	s := d.sums[name]
	if s == nil || s.broken {
		return nil
	}
	dd, err := d.st.LoadDomain(name)
	d.loads++
	if err == nil && dd.Domain != name {
		err = errDomainName
	}
	if err != nil {
		d.log.Error().Err(err).Str("domain", name).Msg("domain file unreadable; the domain is left alone until the crawl restarts")
		s.broken = true
		d.place(s)
		return nil
	}
	dd.ImagesStored = d.imagesStored[name] // images.go: the sum over every domain file
	dm := &dom{d: dd, parsed: map[string]*robots.Robots{}}
	d.cache[name] = d.lru.PushFront(dm)
	return dm
}

// addNew caches a domain new to the crawl and gives it its summary.
func (d *driver) addNew(dm *dom) {
	d.cache[dm.d.Domain] = d.lru.PushFront(dm)
	d.sync(dm)
}

// sync brings dm's summary up to date and places it.
func (d *driver) sync(dm *dom) {
	dd := dm.d
	s := d.sums[dd.Domain]
	if s == nil {
		s = &summary{name: dd.Domain, idx: -1}
		d.sums[dd.Domain] = s
	} else {
		d.status[s.in.Status]--
		d.pendingN -= s.in.Pending
	}
	s.in = dd.Inputs()
	d.status[s.in.Status]++
	d.pendingN += s.in.Pending
	s.readyAt = time.Time{}
	if dd.NextReleaseAt != nil {
		s.readyAt = *dd.NextReleaseAt
	}
	if dd.NextCrawlAfter != nil && dd.NextCrawlAfter.After(s.readyAt) {
		s.readyAt = *dd.NextCrawlAfter
	}
	s.inflight = len(dd.InFlight)
	s.pagesReleased, s.runReleased, s.run = dd.PagesReleased, dd.RunReleased, dd.Run
	s.held, s.gaveUp = dd.Held(), gaveUp(dd)
	s.regHold = dd.RegistryHold != "" && dd.RegistryHold == dd.Status
	s.budgetMarked = dd.Reason == crawl.ReasonBudget
	s.reason = dd.Reason
	d.place(s)
}

// placeOf says where s belongs under the crawl's current limits.
func (d *driver) placeOf(s *summary) (place int8, over bool) {
	switch {
	case s.in.Pending <= 0 || s.broken:
		return placeNone, false
	case s.held:
		return placeHeld, false
	case s.gaveUp:
		return placeNone, false
	case s.inflight >= d.cfg.MaxInFlightPerDomain:
		return placeBusy, false
	case d.cfg.MaxPagesPerDomain > 0 && s.pagesReleased >= d.cfg.MaxPagesPerDomain:
		if s.budgetMarked {
			return placeNone, false
		}
		// eligible marks the reason of a domain held back by its
		// budget when its time comes.
		return placeReady, true
	case d.cfg.MaxPagesPerDomainPerRun > 0 && s.run == d.cfg.Run && s.runReleased >= d.cfg.MaxPagesPerDomainPerRun:
		return placeRun, false
	}
	return placeReady, false
}

// place moves s to where it belongs.
func (d *driver) place(s *summary) {
	if s.regHold && s.in.Pending > 0 && !s.broken {
		d.held[s.name] = s
	} else {
		delete(d.held, s.name)
	}
	p, over := d.placeOf(s)
	if p == s.place && p != placeReady {
		return
	}
	switch s.place {
	case placeReady:
		if s.over {
			d.overN--
		}
		if p != placeReady {
			heap.Remove(&d.ready, s.idx)
		}
	case placeBusy:
		d.busyN--
	case placeRun:
		d.runN--
	}
	switch p {
	case placeReady:
		if over {
			d.overN++
		}
		if s.place == placeReady {
			heap.Fix(&d.ready, s.idx)
		} else {
			heap.Push(&d.ready, s)
		}
	case placeBusy:
		d.busyN++
	case placeRun:
		d.runN++
	}
	s.place, s.over = p, over
}

// replaceAll places every summary again: the crawl's limits changed.
func (d *driver) replaceAll() {
	for _, s := range d.sums {
		d.place(s)
	}
}

// syncDirty brings the summaries of the changed domains up to date.
func (d *driver) syncDirty() {
	for name := range d.dirty {
		if el := d.cache[name]; el != nil {
			d.sync(el.Value.(*dom))
		}
	}
}

// due returns the ready summaries whose time has come (readyAt <= now),
// visiting only those and the heap nodes at their border.
func (d *driver) due(now time.Time) []*summary {
	var out []*summary
	var walk func(i int)
	walk = func(i int) {
		if i >= len(d.ready) {
			return
		}
		s := d.ready[i]
		d.visits++
		if s.readyAt.After(now) {
			return // its subtree is later still
		}
		out = append(out, s)
		walk(2*i + 1)
		walk(2*i + 2)
	}
	walk(0)
	return out
}

// nextReady is the earliest readyAt after now among the ready summaries.
func (d *driver) nextReady(now time.Time) (time.Time, bool) {
	var best time.Time
	found := false
	var walk func(i int)
	walk = func(i int) {
		if i >= len(d.ready) {
			return
		}
		s := d.ready[i]
		if s.readyAt.After(now) {
			if !found || s.readyAt.Before(best) {
				best, found = s.readyAt, true
			}
			return
		}
		walk(2*i + 1)
		walk(2*i + 2)
	}
	walk(0)
	return best, found
}

// anyDue tells whether some ready summary's time has come.
func (d *driver) anyDue(now time.Time) bool {
	return len(d.ready) > 0 && !d.ready[0].readyAt.After(now)
}

// trimCache evicts the least recently used entities beyond the cache's
// bound, never one with changes not yet written or discoveries not yet
// appended.
func (d *driver) trimCache() {
	if d.lru.Len() <= d.cacheCap {
		return
	}
	var appending map[string]bool
	if len(d.appends) > 0 {
		appending = map[string]bool{}
		for k := range d.appends {
			appending[k.domain] = true
		}
	}
	for el := d.lru.Back(); el != nil && d.lru.Len() > d.cacheCap; {
		prev := el.Prev()
		dm := el.Value.(*dom)
		name := dm.d.Domain
		if !d.dirty[name] && !appending[name] {
			d.lru.Remove(el)
			delete(d.cache, name)
		}
		el = prev
	}
}
