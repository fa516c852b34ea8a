package manager

import (
	"container/heap"
	"math"
	"slices"
	"time"
)

// schedule is the in-memory index of deferred/: the earliest deferred
// jobs by not_before (an id, a due time and the job directory's mtime
// when its job.json was read, in Unix nanoseconds), and a min-heap to
// find the earliest. Entries are deleted lazily: a heap item
// whose time no longer matches the index is skipped when it surfaces.
//
// It is bounded: past 2*cap entries it keeps the earliest cap and
// remembers that it overflowed, with a horizon below which every job it
// dropped (or declined) is due at the earliest. Jobs due at or after the
// horizon are not kept until the next fill of deferred/ (Manager.fill),
// made when the schedule runs low (under cap/2) or the horizon is
// reached: nothing is forgotten, and a job is read again only by a fill.
type schedule struct {
	at       map[string]entry
	h        dueHeap
	cap      int
	overflow bool  // some deferred jobs are not kept
	horizon  int64 // while overflow: every job not kept is due at or after it
}

type entry struct{ at, mtime int64 }

type dueItem struct {
	at int64
	id string
}

type dueHeap []dueItem

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].id < h[j].id
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

func newSchedule(capacity int) *schedule {
	return &schedule{at: map[string]entry{}, cap: max(capacity, 1), horizon: math.MaxInt64}
}

// set records (or moves) id's due time, read when its directory had
// mtime. A job not yet kept that is due at or after the horizon of an
// overflowed schedule is declined: the next fill meets it again.
func (s *schedule) set(id string, t, mtime time.Time) {
	at := t.UnixNano()
	old, ok := s.at[id]
	if ok && old.at == at {
		s.at[id] = entry{at: at, mtime: mtime.UnixNano()}
		return
	}
	if !ok && s.overflow && at >= s.horizon {
		return
	}
	s.at[id] = entry{at: at, mtime: mtime.UnixNano()}
	heap.Push(&s.h, dueItem{at: at, id: id})
	if len(s.at) > 2*s.cap {
		s.trim()
	} else if s.h.Len() > 2*len(s.at)+64 {
		s.compact()
	}
}

// trim keeps the earliest cap jobs and lowers the horizon to the
// earliest one dropped.
func (s *schedule) trim() {
	items := make([]dueItem, 0, len(s.at))
	for id, e := range s.at {
		items = append(items, dueItem{at: e.at, id: id})
	}
	slices.SortFunc(items, func(a, b dueItem) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		if a.id < b.id {
			return -1
		}
		if a.id > b.id {
			return 1
		}
		return 0
	})
	s.horizon = min(s.horizon, items[s.cap].at)
	s.overflow = true
	for _, it := range items[s.cap:] {
		delete(s.at, it.id)
	}
	s.h = dueHeap(items[:s.cap:s.cap])
	heap.Init(&s.h)
}

// compact rebuilds the heap from the index when dead items dominate it.
func (s *schedule) compact() {
	h := make(dueHeap, 0, len(s.at))
	for id, e := range s.at {
		h = append(h, dueItem{at: e.at, id: id})
	}
	heap.Init(&h)
	s.h = h
}

func (s *schedule) has(id string) bool {
	_, ok := s.at[id]
	return ok
}

// readAt returns the mtime of id's directory when its job.json was read.
func (s *schedule) readAt(id string) (int64, bool) {
	e, ok := s.at[id]
	return e.mtime, ok
}

func (s *schedule) remove(id string) { delete(s.at, id) }

func (s *schedule) len() int { return len(s.at) }

// next returns the earliest due time, dropping dead heap items on the way.
func (s *schedule) next() (time.Time, bool) {
	for s.h.Len() > 0 {
		top := s.h[0]
		if e, ok := s.at[top.id]; ok && e.at == top.at {
			return time.Unix(0, top.at), true
		}
		heap.Pop(&s.h)
	}
	if s.h.Len() == 0 && cap(s.h) > 1024 {
		s.h = nil // give a drained heap's memory back
	}
	return time.Time{}, false
}

// popDue removes and returns the earliest job due at or before now.
func (s *schedule) popDue(now time.Time) (string, bool) {
	at, ok := s.next()
	if !ok || at.After(now) {
		return "", false
	}
	it := heap.Pop(&s.h).(dueItem)
	delete(s.at, it.id)
	return it.id, true
}

// needFill reports whether jobs not kept must be read again: the
// schedule overflowed and runs low, or the horizon is reached.
func (s *schedule) needFill(now time.Time) bool {
	return s.overflow && (len(s.at) < s.cap/2 || now.UnixNano() >= s.horizon)
}

// wake returns when the horizon is reached, if the schedule overflowed.
func (s *schedule) wake() (time.Time, bool) {
	if !s.overflow {
		return time.Time{}, false
	}
	return time.Unix(0, s.horizon), true
}

// refilling starts a fill: every job not kept will be met again.
func (s *schedule) refilling() {
	s.overflow = false
	s.horizon = math.MaxInt64
}
