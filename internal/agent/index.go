package agent

import (
	"container/heap"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// index is the agent's in-memory view of incoming/: the claimable job IDs
// ordered by priority (highest first), then age (oldest first). It is fed
// by directory events and periodic rescans, so a claim never reads the
// whole directory: each job's job.json is read once, when it appears.
//
// A job of a kind the agent cannot run (no handler, or its handler is in
// an outage: runnable says no) is never handed to a slot: next parks it,
// and unpark gives a kind's parked jobs back when its handler is usable
// again. A parked job stays queued for other agents; it leaves the index
// when it leaves incoming/.
type index struct {
	spool *job.Spool
	// runnable reports whether a kind can run now (nil: every kind). It
	// is called with mu held; it must not call into the index.
	runnable func(kind string) bool
	// onPark is called (without mu) for each job parked by next.
	onPark func(kind, id string)

	mu      sync.Mutex
	h       candHeap
	known   map[string]bool            // in the heap (or being claimed)
	skip    map[string]time.Time       // refused recently (schema, state): skip until
	parked  map[string]map[string]cand // by kind, then id: known but not runnable now
	wake    chan struct{}
	skipFor time.Duration
}

type cand struct {
	id       string
	priority int
	created  time.Time
	queued   time.Time // job.json's updated_at: when it was queued (for the queue-wait metric)
	kind     string    // "" when job.json could not be read: the claim decides
}

type candHeap []cand

func (h candHeap) Len() int { return len(h) }
func (h candHeap) Less(i, j int) bool {
	if h[i].priority != h[j].priority {
		return h[i].priority > h[j].priority
	}
	if !h[i].created.Equal(h[j].created) {
		return h[i].created.Before(h[j].created)
	}
	return h[i].id < h[j].id
}
func (h candHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)   { *h = append(*h, x.(cand)) }
func (h *candHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

func newIndex(s *job.Spool) *index {
	return &index{spool: s, known: map[string]bool{}, parked: map[string]map[string]cand{}, skip: map[string]time.Time{}, wake: make(chan struct{}, 1), skipFor: time.Minute}
}

// add reads incoming/<id>/job.json and queues the id, once. Unreadable jobs
// are queued anyway at priority 0: the claim quarantines them.
func (x *index) add(id string) {
	if c, ok := x.load(id); ok {
		x.push([]cand{c})
	}
}

// load reserves id (marks it known) and reads its ordering keys.
func (x *index) load(id string) (cand, bool) {
	if job.ValidateID(id) != nil {
		return cand{}, false
	}
	x.mu.Lock()
	if x.known[id] {
		x.mu.Unlock()
		return cand{}, false
	}
	if until, ok := x.skip[id]; ok && time.Now().Before(until) {
		x.mu.Unlock()
		return cand{}, false
	}
	x.known[id] = true
	x.mu.Unlock()

	c := cand{id: id}
	j, err := job.ReadJob(x.spool.JobDir(job.Queued, "", id))
	switch {
	case err == nil:
		c.priority, c.created, c.queued, c.kind = j.Priority, j.CreatedAt, j.UpdatedAt, j.Kind
	case errors.Is(err, fsq.ErrVanished):
		x.mu.Lock()
		delete(x.known, id)
		x.mu.Unlock()
		return cand{}, false
	}
	return c, true
}

// push adds loaded candidates in one step, so that a slot woken by the
// first one still sees the best of all of them.
func (x *index) push(cs []cand) {
	if len(cs) == 0 {
		return
	}
	x.mu.Lock()
	for _, c := range cs {
		heap.Push(&x.h, c)
	}
	x.mu.Unlock()
	x.signal()
}

func (x *index) signal() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// next blocks until a candidate is available or ctx is done.
func (x *index) next(ctx context.Context) (cand, bool) {
	for {
		if ctx.Err() != nil {
			return cand{}, false
		}
		if c, ok := x.tryNext(); ok {
			return c, true
		}
		select {
		case <-ctx.Done():
			return cand{}, false
		case <-x.wake:
		}
	}
}

// tryNext returns the best runnable candidate, if there is one now.
func (x *index) tryNext() (cand, bool) {
	x.mu.Lock()
	var parked []cand
	for x.h.Len() > 0 {
		c := heap.Pop(&x.h).(cand)
		if c.kind != "" && x.runnable != nil && !x.runnable(c.kind) {
			x.park(c)
			parked = append(parked, c)
			continue
		}
		more := x.h.Len() > 0
		x.mu.Unlock()
		x.notePark(parked)
		if more {
			x.signal() // let another idle slot take the next one
		}
		return c, true
	}
	x.mu.Unlock()
	x.notePark(parked)
	return cand{}, false
}

// park sets c aside (mu held): known, but not in the heap.
func (x *index) park(c cand) {
	m := x.parked[c.kind]
	if m == nil {
		m = map[string]cand{}
		x.parked[c.kind] = m
	}
	m[c.id] = c
}

func (x *index) notePark(cs []cand) {
	if x.onPark == nil {
		return
	}
	for _, c := range cs {
		x.onPark(c.kind, c.id)
	}
}

// unpark gives the jobs parked under kind back to the heap. Call it after
// runnable has started to say yes for kind.
func (x *index) unpark(kind string) {
	x.mu.Lock()
	m := x.parked[kind]
	delete(x.parked, kind)
	cs := make([]cand, 0, len(m))
	for _, c := range m {
		cs = append(cs, c)
	}
	x.mu.Unlock()
	x.push(cs)
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

// rescan lists incoming/ and adds whatever is not known yet.
func (x *index) rescan() error {
	ents, err := scanIncoming(x.spool)
	if err != nil {
		return err
	}
	now := time.Now()
	listed := make(map[string]bool, len(ents))
	for _, id := range ents {
		listed[id] = true
	}
	x.mu.Lock()
	for id, until := range x.skip {
		if now.After(until) {
			delete(x.skip, id)
		}
	}
	for _, m := range x.parked { // parked jobs whose removal was missed
		for id := range m {
			if !listed[id] {
				x.unparkID(id)
			}
		}
	}
	x.mu.Unlock()
	batch := make([]cand, 0, 256)
	for _, id := range ents {
		if c, ok := x.load(id); ok {
			if batch = append(batch, c); len(batch) == cap(batch) {
				x.push(batch)
				batch = batch[:0]
			}
		}
	}
	x.push(batch)
	return nil
}

func (x *index) len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.h.Len()
}

// scanIncoming lists the job ids in incoming/ (locks excluded). Entries
// that are not directories but carry a valid id are returned too: the
// claim quarantines them under the lock.
func scanIncoming(s *job.Spool) ([]string, error) {
	e, err := fsq.ScanDir(s.StateDir(job.Queued))
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(e.Dirs)+len(e.Hostile))
	for _, names := range [][]string{e.Dirs, e.Hostile} {
		for _, name := range names {
			if strings.HasSuffix(name, job.LockSuffix) || job.ValidateID(name) != nil {
				continue
			}
			ids = append(ids, name)
		}
	}
	return ids, nil
}
