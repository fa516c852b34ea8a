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
type index struct {
	spool *job.Spool

	mu      sync.Mutex
	h       candHeap
	known   map[string]bool      // in the heap (or being claimed)
	skip    map[string]time.Time // refused recently (schema, state): skip until
	wake    chan struct{}
	skipFor time.Duration
}

type cand struct {
	id       string
	priority int
	created  time.Time
	queued   time.Time // job.json's updated_at: when it was queued (for the queue-wait metric)
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
	return &index{spool: s, known: map[string]bool{}, skip: map[string]time.Time{}, wake: make(chan struct{}, 1), skipFor: time.Minute}
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
		c.priority, c.created, c.queued = j.Priority, j.CreatedAt, j.UpdatedAt
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
		x.mu.Lock()
		if x.h.Len() > 0 {
			c := heap.Pop(&x.h).(cand)
			more := x.h.Len() > 0
			x.mu.Unlock()
			if more {
				x.signal() // let another idle slot take the next one
			}
			return c, true
		}
		x.mu.Unlock()
		select {
		case <-ctx.Done():
			return cand{}, false
		case <-x.wake:
		}
	}
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
	x.mu.Unlock()
}

// rescan lists incoming/ and adds whatever is not known yet.
func (x *index) rescan() error {
	ents, err := scanIncoming(x.spool)
	if err != nil {
		return err
	}
	now := time.Now()
	x.mu.Lock()
	for id, until := range x.skip {
		if now.After(until) {
			delete(x.skip, id)
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
