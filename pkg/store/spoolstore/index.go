package spoolstore

import (
	"container/heap"
	"errors"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// index is the indexed store's in-memory view of incoming/ (WithIndex):
// the claimable job IDs
// ordered by priority (highest first), then age (oldest first), then id.
// It is fed by directory events and by refills (a listing of incoming/),
// so a claim never reads the whole directory. A job that leaves
// incoming/ stays held until a claim of it fails or a full listing does
// not find it (a removal event does not touch the heap).
//
// Bounded. The index holds at most cap candidates (and at most cap parked
// jobs per kind): the best by (priority, age, id). When it drops some,
// it remembers that more exist (more), and a refill (when the held set
// runs low, and at every periodic rescan) lists incoming/ again and takes
// the best cap of what it does not hold. No job is forgotten: a job
// beyond the cap is in incoming/, and the refill that finds it is due as
// soon as the better ones are claimed.
//
// Cheap to learn. A refill reads no job.json: a job's priority comes from
// its hint (job.PriorityHintDir; none: the default, 0) and its age from
// its ID (job.IDTime). Both are estimates never worse than the job.json
// they stand for (when hints are kept), so next reads job.json lazily:
// the best candidate is read, and handed out only if it is still at
// least as good as the next one's estimate and as bound, the best
// estimate of what the index dropped; otherwise it goes back with its
// real keys, or a refill comes first. The order handed out is therefore
// exactly the order of job.json. An ID that carries no time is read as
// soon as a refill takes it, and a job that appears by an event at once.
// The hints are listed before incoming/: their jobs of a positive
// priority are handed out while incoming/ is still being listed, the
// others only once the first listing is done.
//
// A job of a kind the claim did not ask for (store.ClaimOptions.Kinds:
// an agent's kinds without a handler, paused, or whose handler is in an
// outage) is never handed out: tryNext parks it, and unpark gives a
// kind's parked jobs back when a claim asks for it again. A parked job
// stays queued for other agents; it leaves the index when it leaves
// incoming/.
type index struct {
	spool *job.Spool
	// cap bounds the candidates held (and the parked jobs of each kind).
	cap int

	mu         sync.Mutex
	h          candHeap
	known      map[string]struct{}        // in the heap, being read or claimed, or parked
	skip       map[string]time.Time       // refused recently (schema, state): skip until
	parked     map[string]map[string]cand // by kind, then id: known but not runnable now
	parkedOver map[string]bool            // kinds whose parked jobs were dropped (cap)
	kinds      map[string]string          // interned kinds
	more       bool                       // incoming/ holds candidates the index dropped
	// listed: a listing of incoming/ was completed. Before, only jobs of
	// a positive priority (known from their hints) are handed out: any
	// other may be worse than a job not listed yet.
	listed bool
	// lastCount is how many jobs the last full listing saw in incoming/.
	lastCount int
	// bound, while more, is the best estimate of a candidate dropped (a
	// refill's estimate of it): no job outside the index is better. A
	// candidate worse than bound is handed out only after a refill.
	bound    cand
	boundSet bool
	// cursor, when set, is an estimate up to which every job of
	// incoming/ is held, handed out, or parked and dropped (cap): a
	// refill takes only jobs after it, so that more jobs of kinds the
	// agent cannot run than it may hold do not hide the others (nor are
	// read again at every refill). It moves to the worst of the last
	// refill's jobs once one of them was dropped as parked, and is reset
	// when a kind is unparked, a job held is dropped before it, a job is
	// skipped, and every cursorLife (jobs that arrived unseen).
	cursor      cand
	cursorSet   bool
	cursorSince time.Time
	lastWorst   cand // the worst job the last refill took
	lastSet     bool
	parkDropped bool // a job was dropped as parked since the last refill
	wake        chan struct{}
	refillReq   chan struct{} // a refill is wanted (served by the indexed store's consume loop)
	refillMu    sync.Mutex    // one refill at a time
	skipFor     time.Duration
	// reads counts the job.json reads of the index (tests: the start
	// does not read every job).
	reads atomic.Int64
}

// maxNegative bounds the jobs of negative priority a refill sets apart
// (a few MiB); beyond, they are taken at the default priority, read,
// and handed out in their order all the same.
const maxNegative = 1 << 16

// maxPrune bounds the stale hints a refill looks into.
const maxPrune = 256

// cursorLife is how long a refill cursor is trusted.
const cursorLife = 5 * time.Minute

// DefaultIndexCap is how many candidates an index holds (twice as many
// between two trims): about 100 bytes each, so a few MiB at most, and a
// refill (a listing of incoming/: about half a second at a million jobs)
// per six thousand claims or so.
const DefaultIndexCap = 8192

// cand is one claimable job as the index holds it.
type cand struct {
	id       string
	kind     string // interned; "" until read, or when job.json could not be read (the claim decides)
	created  int64  // unix nanos: job.json's created_at once read, else its estimate
	queued   int64  // job.json's updated_at (unix nanos; 0: not read): when it was queued, for the queue-wait metric
	priority int32
	read     bool // the keys come from job.json (else: estimates from the hint and the ID)
	hinted   bool // the priority came from a hint
}

// before reports whether a is claimed before b.
func (a *cand) before(b *cand) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if a.created != b.created {
		return a.created < b.created
	}
	return a.id < b.id
}

type candHeap []cand

func (h candHeap) Len() int           { return len(h) }
func (h candHeap) Less(i, j int) bool { return h[i].before(&h[j]) }
func (h candHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *candHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

func newIndex(s *job.Spool) *index {
	return &index{
		spool: s, cap: DefaultIndexCap,
		known: map[string]struct{}{}, parked: map[string]map[string]cand{}, parkedOver: map[string]bool{},
		kinds: map[string]string{}, skip: map[string]time.Time{},
		wake: make(chan struct{}, 1), refillReq: make(chan struct{}, 1), skipFor: time.Minute,
	}
}

// clampPriority fits a job's priority into the index's int32.
func clampPriority(p int) int32 {
	return int32(max(min(p, math.MaxInt32), math.MinInt32))
}

// estimate is what a listing tells of job id: its hinted priority, and
// the creation time its ID carries. An ID that carries none is estimated
// the newest of its priority (math.MaxInt64) and read as soon as it is
// taken (timeless).
func estimate(id string, prio int, hinted bool) cand {
	c := cand{id: id, priority: clampPriority(prio), created: math.MaxInt64, hinted: hinted}
	if t, ok := job.IDTime(id); ok {
		c.created = t.UnixNano()
	}
	return c
}

// timeless reports whether c's created is no estimate from its ID.
func (c *cand) timeless() bool { return !c.read && c.created == math.MaxInt64 }

// add reads incoming/<id>/job.json and queues the id, once. Unreadable jobs
// are queued anyway: the claim quarantines them. The id is marked known
// only as it is queued, not while it is read: a claim's listing (see
// indexed.claim) that finds it known must find it in the heap too, or it
// would pass it over for a worse job.
func (x *index) add(id string) {
	if job.ValidateID(id) != nil {
		return
	}
	x.mu.Lock()
	ok := x.addable(id)
	x.mu.Unlock()
	if !ok {
		return
	}
	c := estimate(id, 0, false)
	if !x.read(&c) {
		return
	}
	if c.priority != 0 && c.kind != "" {
		x.repairHint(c) // a refill must see its priority if it is dropped
	}
	x.mu.Lock()
	if !x.addable(id) { // a refill took it meanwhile
		x.mu.Unlock()
		return
	}
	x.known[id] = struct{}{}
	heap.Push(&x.h, c)
	x.trim()
	x.mu.Unlock()
	x.signal()
}

// addable reports whether id is neither known nor skipped (mu held).
func (x *index) addable(id string) bool {
	if _, ok := x.known[id]; ok {
		return false
	}
	if until, ok := x.skip[id]; ok && time.Now().Before(until) {
		return false
	}
	return true
}

// read fills c's keys from its job.json; false if the job is gone from
// incoming/. An unreadable job.json keeps the estimates, kind "".
func (x *index) read(c *cand) bool {
	x.reads.Add(1)
	j, err := job.ReadJob(x.spool.JobDir(job.Queued, "", c.id))
	switch {
	case err == nil:
		c.priority, c.created, c.queued = clampPriority(j.Priority), j.CreatedAt.UnixNano(), j.UpdatedAt.UnixNano()
		c.kind = x.intern(j.Kind)
	case errors.Is(err, fsq.ErrVanished):
		return false
	}
	c.read = true
	return true
}

func (x *index) intern(kind string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	if k, ok := x.kinds[kind]; ok {
		return k
	}
	if len(x.kinds) < 1024 { // a hostile spool's kinds are not interned
		x.kinds[kind] = kind
	}
	return kind
}

// push adds candidates (already known) in one step, so that a slot woken
// by the first one still sees the best of all of them.
func (x *index) push(cs []cand) {
	if len(cs) == 0 {
		return
	}
	x.mu.Lock()
	for _, c := range cs {
		heap.Push(&x.h, c)
	}
	x.trim()
	x.mu.Unlock()
	x.signal()
}

// trim keeps the best cap candidates once the heap holds twice as many
// (mu held); the others are forgotten until a refill finds them again,
// and the best of them bounds what may be handed out meanwhile.
func (x *index) trim() {
	if len(x.h) <= 2*x.cap {
		return
	}
	sort.Slice(x.h, func(i, j int) bool { return x.h[i].before(&x.h[j]) })
	for _, c := range x.h[x.cap:] {
		delete(x.known, c.id)
		x.lowerBound(c)
		if e := estimate(c.id, int(c.priority), c.priority != 0); x.cursorSet && !x.cursor.before(&e) {
			x.cursorSet = false // a refill must find it again
		}
	}
	clear(x.h[x.cap:])
	x.h = x.h[:x.cap] // sorted: still a heap
	x.more = true
}

// lowerBound notes a dropped candidate's estimate e (mu held).
func (x *index) lowerBound(e cand) {
	if !x.boundSet || e.before(&x.bound) {
		x.bound, x.boundSet = e, true
	}
}

func (x *index) signal() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// wantRefill asks for a refill when the index dropped candidates and
// holds few (mu held).
func (x *index) wantRefill() {
	if x.more && len(x.h) <= x.cap/4 {
		x.askRefill()
	}
}

func (x *index) askRefill() {
	select {
	case x.refillReq <- struct{}{}:
	default:
	}
}

// tryNext returns the best runnable candidate, if there is one now.
// runnable (nil: every kind) says whether a kind may be handed out now;
// it is called with mu held and must not call into the index. A
// candidate of another kind is parked, and onPark (when not nil) told of
// it, without mu.
func (x *index) tryNext(runnable func(kind string) bool, onPark func(kind, id string)) (cand, bool) {
	var parked []cand
	defer func() { notePark(onPark, parked) }()
	x.mu.Lock()
	for {
		x.wantRefill()
		if x.h.Len() == 0 {
			x.mu.Unlock()
			return cand{}, false
		}
		c := heap.Pop(&x.h).(cand)
		if !c.read {
			x.mu.Unlock()
			ok := x.read(&c)
			switch {
			case !ok && c.hinted:
				x.dropStaleHint(c)
			case ok && c.priority != 0 && !c.hinted && c.kind != "":
				x.repairHint(c)
			}
			x.mu.Lock()
			if !ok {
				delete(x.known, c.id)
				continue
			}
			if x.h.Len() > 0 && x.h[0].before(&c) {
				heap.Push(&x.h, c) // its estimate was better than it is
				continue
			}
		}
		if !x.listed && c.priority <= 0 {
			// The first listing is under way: a job not listed yet
			// may be better. It signals when it is done.
			heap.Push(&x.h, c)
			x.mu.Unlock()
			return cand{}, false
		}
		if x.more && x.boundSet && x.bound.before(&c) {
			// A job the index dropped may be better: refill first.
			heap.Push(&x.h, c)
			x.askRefill()
			x.mu.Unlock()
			return cand{}, false
		}
		if c.kind != "" && runnable != nil && !runnable(c.kind) {
			if x.park(c) {
				parked = append(parked, c)
			}
			continue
		}
		more := x.h.Len() > 0
		x.mu.Unlock()
		if more {
			x.signal() // let another idle slot take the next one
		}
		return c, true
	}
}

// repairHint writes the missing hint of a job read whose priority is
// not the default (a spool older than hints, a hint lost): otherwise
// every refill would estimate it wrong and read it again.
func (x *index) repairHint(c cand) {
	_ = x.spool.RepairHint(int(c.priority), c.id)
}

// dropStaleHint removes the hint of a job that left incoming/ for good.
func (x *index) dropStaleHint(c cand) {
	_, _ = x.spool.DropStaleHint(int(c.priority), c.id)
}

// park sets c aside (mu held): known, but not in the heap. Beyond cap
// jobs of its kind, c is forgotten instead (false) and found again by a
// refill once the kind is unparked.
func (x *index) park(c cand) bool {
	m := x.parked[c.kind]
	if m == nil {
		m = map[string]cand{}
		x.parked[c.kind] = m
	}
	if len(m) >= x.cap {
		delete(x.known, c.id)
		x.parkedOver[c.kind], x.parkDropped = true, true
		return false
	}
	m[c.id] = c
	return true
}

func notePark(onPark func(kind, id string), cs []cand) {
	if onPark == nil {
		return
	}
	for _, c := range cs {
		onPark(c.kind, c.id)
	}
}

// unparkRunnable gives back the jobs parked under every kind runnable
// now says yes for (nil: every kind).
func (x *index) unparkRunnable(runnable func(kind string) bool) {
	x.mu.Lock()
	if len(x.parked) == 0 {
		x.mu.Unlock()
		return
	}
	var kinds []string
	for kind := range x.parked {
		if runnable == nil || runnable(kind) {
			kinds = append(kinds, kind)
		}
	}
	x.mu.Unlock()
	for _, kind := range kinds {
		x.unpark(kind)
	}
}

// unpark gives the jobs parked under kind back to the heap. Call it once
// a claim asks for kind again.
func (x *index) unpark(kind string) {
	x.mu.Lock()
	m := x.parked[kind]
	delete(x.parked, kind)
	if x.parkedOver[kind] {
		// The jobs dropped may be better than any held: found by a
		// refill before the next is handed out.
		delete(x.parkedOver, kind)
		x.more, x.cursorSet = true, false
		x.lowerBound(cand{priority: math.MaxInt32, created: math.MinInt64})
	}
	cs := make([]cand, 0, len(m))
	for _, c := range m {
		cs = append(cs, c)
	}
	x.mu.Unlock()
	x.push(cs)
	x.mu.Lock()
	x.wantRefill()
	x.mu.Unlock()
}

// unparkID drops id from the parked jobs (mu held); false if not parked.
func (x *index) unparkID(id string) bool {
	for kind, m := range x.parked {
		if _, ok := m[id]; ok {
			delete(m, id)
			if len(m) == 0 {
				delete(x.parked, kind)
			}
			delete(x.known, id)
			return true
		}
	}
	return false
}

// parkedLen is the number of parked jobs.
func (x *index) parkedLen() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, m := range x.parked {
		n += len(m)
	}
	return n
}

// forget drops id after a claim attempt. If the attempt lost to a lock that
// has meanwhile gone, the id is queued again (its removal event may have
// been seen while the id was still known).
func (x *index) forget(id string, recheckLock bool) {
	x.mu.Lock()
	delete(x.known, id)
	x.mu.Unlock()
	if !recheckLock {
		return
	}
	if _, err := os.Lstat(x.spool.LockPath(id)); os.IsNotExist(err) {
		if _, err := os.Lstat(x.spool.JobDir(job.Queued, "", id)); err == nil {
			x.add(id)
		}
	}
}

// refuse drops id and skips it for a while (a job this agent cannot
// process: unknown schema, status not queued). It is retried after skipFor
// or when its directory changes.
func (x *index) refuse(id string) { x.skipUntil(id, time.Now().Add(x.skipFor)) }

// retryLater drops id and skips it for a short while: its claim failed
// for a reason of the moment (a full disk, an I/O error), not of the job.
// It is retried at the first rescan after that.
func (x *index) retryLater(id string) { x.skipUntil(id, time.Now().Add(time.Second)) }

func (x *index) skipUntil(id string, until time.Time) {
	x.mu.Lock()
	delete(x.known, id)
	x.skip[id] = until
	x.more, x.cursorSet = true, false // found again by a refill once the skip is over
	x.mu.Unlock()
}

// removed reacts to a name leaving incoming/.
func (x *index) removed(name string) {
	if id, ok := strings.CutSuffix(name, job.LockSuffix); ok {
		// A lock went away: the job may be claimable again.
		if _, err := os.Lstat(x.spool.JobDir(job.Queued, "", id)); err == nil {
			x.add(id)
		}
		return
	}
	x.mu.Lock()
	delete(x.skip, name)
	x.unparkID(name) // gone from incoming/ (claimed elsewhere, moved)
	x.mu.Unlock()
}

// rescan is a full refill (tests).
func (x *index) rescan() error { _, err := x.refill(false); return err }

// refill lists the hints and incoming/ and takes the best cap candidates
// the index does not hold, by their estimates: no job.json is read. Its
// memory is that of cap candidates, whatever the size of incoming/. It
// returns how many candidates it took. With hintsOnly it lists the hints
// alone (a periodic rescan of an index that holds less than the queue,
// see indexed.refill): what it knows it dropped it still knows.
func (x *index) refill(hintsOnly bool) (int, error) { return x.refillSignal(hintsOnly, true) }

// refillSignal is refill; with signal false it wakes no waiter unless it
// took a job (a claim's own listing: see indexed.claim).
func (x *index) refillSignal(hintsOnly, signal bool) (int, error) {
	x.refillMu.Lock()
	defer x.refillMu.Unlock()
	now := time.Now()
	x.mu.Lock()
	if !hintsOnly {
		x.more, x.boundSet = false, false // what is dropped from here on sets them again
		if x.cursorSet && now.Sub(x.cursorSince) > cursorLife {
			x.cursorSet = false
		}
		if x.parkDropped && x.lastSet && (!x.cursorSet || x.cursor.before(&x.lastWorst)) {
			x.cursor, x.cursorSet, x.cursorSince = x.lastWorst, true, now
		}
		x.parkDropped = false
	}
	cursor, cursorSet := x.cursor, x.cursorSet
	after := func(e cand) bool { return !cursorSet || cursor.before(&e) }
	for id, until := range x.skip {
		if now.After(until) {
			delete(x.skip, id)
		}
	}
	held := make(map[string]struct{}, len(x.known)+len(x.skip))
	for id := range x.known {
		held[id] = struct{}{}
	}
	for id := range x.skip {
		held[id] = struct{}{}
	}
	// A full index takes only jobs better than the worst it holds (a job
	// missed by the events, a job whose hint it did not know): the
	// others are dropped, as they would be by the next trim.
	var worst *cand
	if len(x.h) >= x.cap {
		w := x.h[0]
		for i := range x.h {
			if w.before(&x.h[i]) {
				w = x.h[i]
			}
		}
		worst = &w
	}
	parked := map[string]bool{}
	for _, m := range x.parked {
		for id := range m {
			parked[id] = false
		}
	}
	// The candidates held: those a full listing does not find left
	// incoming/ (their removal events not read yet), and those estimated
	// without a hint get the priority of one the hints' listing finds (a
	// job listed by an earlier refill whose listing of the hints came
	// before its submit wrote the hint).
	var inHeap map[string]bool
	if !hintsOnly {
		inHeap = make(map[string]bool, len(x.h))
	}
	unhinted := map[string]struct{}{}
	for i := range x.h {
		if inHeap != nil {
			inHeap[x.h[i].id] = false
		}
		if !x.h[i].read && !x.h[i].hinted {
			unhinted[x.h[i].id] = struct{}{}
		}
	}
	x.mu.Unlock()

	// Hints first, into their own selection. A positive hint's estimate
	// is better than the same job's listing estimate and than any job
	// without a hint: the jobs taken from positive hints are handed out
	// at once, before the listing of incoming/ is done (at a million jobs
	// it takes a while). The jobs of negative hints are remembered (up to
	// maxNegative) so that the listing does not offer them at the
	// default priority.
	hsel := newSelection(x.cap)
	neg := map[string]struct{}{}
	rehint := map[string]int32{}
	pruned := 0
	// A hints' directory that cannot be listed costs only order: the
	// listing below still finds every job.
	_ = x.spool.ScanHints(func(prio int, id string) {
		e := estimate(id, prio, true)
		if prio < 0 && len(neg) < maxNegative {
			neg[id] = struct{}{}
		}
		if _, ok := held[id]; ok {
			if _, ok := unhinted[id]; ok && prio > 0 {
				rehint[id] = e.priority
			}
			return
		}
		if !after(e) {
			return
		}
		if !hsel.wouldTake(e) || worst != nil && !e.before(worst) {
			hsel.drop(e)
			return
		}
		if _, err := os.Lstat(x.spool.JobDir(job.Queued, "", id)); err != nil {
			// Not queued now. A hint whose job is gone or terminal is
			// dropped (a few per refill: each costs a Locate).
			if os.IsNotExist(err) && pruned < maxPrune {
				pruned++
				_, _ = x.spool.DropStaleHint(prio, id)
			}
			return
		}
		hsel.offer(e)
	})
	if len(rehint) > 0 {
		x.mu.Lock()
		x.rehint(rehint)
		x.mu.Unlock()
	}
	hinted := x.merge(hsel, now)
	if hintsOnly {
		if signal {
			x.signal()
		}
		return len(hinted), nil
	}
	for _, c := range hinted {
		held[c.id] = struct{}{}
	}
	// With more jobs of a positive hint than the index takes, no job of
	// the listing can be better than those it left: the listing offers
	// none (it would offer a hinted job it left at the default priority).
	onlyHints := hsel.dropped && hsel.best.priority > 0

	sel := newSelection(x.cap)
	count := 0
	err := fsq.ScanDirFunc(x.spool.StateDir(job.Queued), func(name string, _ bool) error {
		// Entries that are not directories but carry a valid id are
		// taken too: the claim quarantines them under the lock.
		if strings.HasSuffix(name, job.LockSuffix) || job.ValidateID(name) != nil {
			return nil
		}
		count++
		if _, ok := parked[name]; ok {
			parked[name] = true
		}
		if _, ok := inHeap[name]; ok {
			inHeap[name] = true
		}
		if _, ok := held[name]; ok {
			return nil
		}
		if _, ok := neg[name]; ok || onlyHints {
			return nil
		}
		if e := estimate(name, 0, false); worst != nil && !e.before(worst) {
			sel.drop(e)
		} else if after(e) {
			sel.offer(e)
		}
		return nil
	})
	if err != nil {
		x.mu.Lock()
		x.more = true
		x.mu.Unlock()
		return len(hinted), err
	}
	listed := x.merge(sel, now)
	x.mu.Lock()
	if onlyHints {
		x.more = true // the listing's jobs come after those hints
	}
	x.listed = true // default-priority jobs may go (see tryNext)
	x.lastCount = count
	// The cursor may move to the worst job taken only if every job up to
	// it was taken: not past a hinted job the hints' selection dropped.
	x.lastSet = false
	if n := len(sel.h.c); n > 0 && (!hsel.dropped || sel.h.c[0].before(&hsel.best)) {
		x.lastWorst, x.lastSet = sel.h.c[0], true // the top of its heap: the worst
	} else if len(hsel.h.c) > 0 {
		x.lastWorst, x.lastSet = hsel.h.c[0], true
	}
	for id, listed := range parked { // parked jobs whose removal was missed
		if !listed {
			x.unparkID(id)
		}
	}
	gone := x.dropUnlisted(inHeap)
	x.mu.Unlock()
	for _, id := range gone {
		// Back in incoming/ since (moved out and in again): its event
		// may have found it still known.
		if _, err := os.Lstat(x.spool.JobDir(job.Queued, "", id)); err == nil {
			x.add(id)
		}
	}
	if signal {
		x.signal() // also when nothing was new: a slot waits for this refill
	}
	return len(hinted) + len(listed), nil
}

// dropUnlisted drops the candidates held since before a full listing of
// incoming/ that it did not find (inHeap: id -> listed), and returns
// them (mu held). They left incoming/ and their removal events are not
// read yet (a removal does not touch the heap): held, they would be
// handed out before the jobs listed, and a claim of one of them takes
// nothing.
func (x *index) dropUnlisted(inHeap map[string]bool) []string {
	var gone map[string]struct{}
	for id, listed := range inHeap {
		if !listed {
			if gone == nil {
				gone = map[string]struct{}{}
			}
			gone[id] = struct{}{}
		}
	}
	if gone == nil {
		return nil
	}
	var ids []string
	kept := x.h[:0]
	for _, c := range x.h {
		if _, ok := gone[c.id]; ok {
			delete(x.known, c.id)
			ids = append(ids, c.id)
			continue
		}
		kept = append(kept, c)
	}
	clear(x.h[len(kept):])
	x.h = kept
	heap.Init(&x.h)
	return ids
}

// rehint gives the candidates estimated without a hint the priority of
// their hint (prio: id -> hinted priority), which is better (mu held).
func (x *index) rehint(prio map[string]int32) {
	changed := false
	for i := range x.h {
		c := &x.h[i]
		if p, ok := prio[c.id]; ok && !c.read && !c.hinted && p > c.priority {
			c.priority, c.hinted, changed = p, true, true
		}
	}
	if changed {
		heap.Init(&x.h)
	}
}

// merge adds what sel took that the index does not hold meanwhile (an
// event may have added it, a claim skipped it), reads the timeless ones,
// and notes what sel dropped. It returns the candidates added.
func (x *index) merge(sel *selection, now time.Time) []cand {
	cs := sel.take()
	x.mu.Lock()
	if sel.dropped {
		x.more = true
		x.lowerBound(sel.best)
	}
	keep := make([]cand, 0, len(cs))
	for _, c := range cs {
		if _, ok := x.known[c.id]; ok {
			continue // added by an event meanwhile
		}
		if until, ok := x.skip[c.id]; ok && now.Before(until) {
			continue
		}
		x.known[c.id] = struct{}{}
		keep = append(keep, c)
	}
	x.mu.Unlock()
	// A timeless candidate is read now: its estimate is no lower bound,
	// so the heap's order needs its real keys.
	read := keep[:0]
	for _, c := range keep {
		if c.timeless() && !x.read(&c) {
			x.mu.Lock()
			delete(x.known, c.id)
			x.mu.Unlock()
			continue
		}
		read = append(read, c)
	}
	x.push(read)
	return read
}

// small reports whether a listing of incoming/ is cheap: the last one saw
// at most syncListMax jobs, and the index dropped none since.
func (x *index) small() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.listed && !x.more && x.lastCount <= syncListMax
}

// syncListMax bounds the jobs of incoming/ a claim lists itself before
// it takes its candidates (see indexed.claim).
const syncListMax = 256

// partial reports whether the index knows it holds less than incoming/.
func (x *index) partial() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.more
}

func (x *index) len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.h.Len()
}

// selection keeps the best n candidates offered: a heap whose top is the
// worst kept, and the ids kept.
type selection struct {
	n       int
	h       worstHeap
	ids     map[string]int32 // id -> position in h
	dropped bool             // some offer was refused or evicted
	best    cand             // the best refused or evicted, if dropped
}

func (s *selection) drop(c cand) {
	if !s.dropped || c.before(&s.best) {
		s.best = c
	}
	s.dropped = true
}

func newSelection(n int) *selection {
	ids := map[string]int32{}
	return &selection{n: max(n, 1), ids: ids, h: worstHeap{ids: ids}}
}

// wouldTake reports whether c would be kept if offered now.
func (s *selection) wouldTake(c cand) bool {
	if i, ok := s.ids[c.id]; ok {
		return c.before(&s.h.c[i])
	}
	return len(s.h.c) < s.n || c.before(&s.h.c[0])
}

func (s *selection) offer(c cand) {
	if i, ok := s.ids[c.id]; ok { // offered again: keep the better estimate
		if c.before(&s.h.c[i]) {
			s.h.c[i] = c
			heap.Fix(&s.h, int(i))
		}
		return
	}
	if len(s.h.c) < s.n {
		heap.Push(&s.h, c)
		return
	}
	if !c.before(&s.h.c[0]) {
		s.drop(c)
		return
	}
	s.drop(s.h.c[0])
	delete(s.ids, s.h.c[0].id)
	s.h.c[0] = c
	s.ids[c.id] = 0
	heap.Fix(&s.h, 0)
}

func (s *selection) take() []cand { return s.h.c }

// worstHeap is a heap of candidates, the worst on top, that keeps ids
// (id -> position) up to date.
type worstHeap struct {
	c   []cand
	ids map[string]int32
}

func (h worstHeap) Len() int           { return len(h.c) }
func (h worstHeap) Less(i, j int) bool { return h.c[j].before(&h.c[i]) }
func (h worstHeap) Swap(i, j int) {
	h.c[i], h.c[j] = h.c[j], h.c[i]
	h.ids[h.c[i].id], h.ids[h.c[j].id] = int32(i), int32(j)
}
func (h *worstHeap) Push(x any) {
	c := x.(cand)
	h.ids[c.id] = int32(len(h.c))
	h.c = append(h.c, c)
}
func (h *worstHeap) Pop() any {
	c := h.c[len(h.c)-1]
	h.c = h.c[:len(h.c)-1]
	delete(h.ids, c.id)
	return c
}
