package manager

import (
	"container/heap"
	"time"
)

// schedule is the in-memory index of deferred/: each job's not_before, and
// a min-heap to find the earliest. Entries are deleted lazily: a heap item
// whose time no longer matches the index is skipped when it surfaces.
type schedule struct {
	at map[string]time.Time
	h  dueHeap
}

type dueItem struct {
	at time.Time
	id string
}

type dueHeap []dueItem

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
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

func newSchedule() *schedule { return &schedule{at: map[string]time.Time{}} }

// set records (or moves) id's due time.
func (s *schedule) set(id string, at time.Time) {
	if old, ok := s.at[id]; ok && old.Equal(at) {
		return
	}
	s.at[id] = at
	heap.Push(&s.h, dueItem{at: at, id: id})
}

func (s *schedule) has(id string) bool {
	_, ok := s.at[id]
	return ok
}

func (s *schedule) remove(id string) { delete(s.at, id) }

func (s *schedule) len() int { return len(s.at) }

// next returns the earliest due time, dropping dead heap items on the way.
func (s *schedule) next() (time.Time, bool) {
	for s.h.Len() > 0 {
		top := s.h[0]
		if at, ok := s.at[top.id]; ok && at.Equal(top.at) {
			return top.at, true
		}
		heap.Pop(&s.h)
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

// retain drops every id not in present (after a full listing of
// deferred/) and compacts the heap when dead items dominate it.
func (s *schedule) retain(present map[string]bool) {
	for id := range s.at {
		if !present[id] {
			delete(s.at, id)
		}
	}
	if s.h.Len() > 2*len(s.at)+64 {
		h := make(dueHeap, 0, len(s.at))
		for id, at := range s.at {
			h = append(h, dueItem{at: at, id: id})
		}
		heap.Init(&h)
		s.h = h
	}
}
