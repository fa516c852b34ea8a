// Package spoolview keeps an in-memory view of a spool's size: how many
// jobs each state holds, the claim locks, the quarantined entries, the
// running jobs of each agent and the creation time of the oldest queued
// job. It is what farro's metrics and `farroctl top` read, so that asking
// costs the same with a million jobs in the spool as with ten: nothing is
// listed when a figure is asked for.
//
// The view is fed by fsnotify events on the state directories (a name
// appears or goes) and corrected by a full relisting every Rescan (default
// one minute; fsnotify drops events on overflow and never fires on network
// filesystems, where the relistings are then the only source). Each
// directory's names are kept as a set (64-bit hashes of the last listing
// plus the changes seen since), so an event reported twice, or both by an
// event and by a listing, is counted once: the counts are exact once the
// events in flight have been read. in-progress/ is small (one entry per
// running job) and is relisted every Running (default 1s) instead.
//
// The only job.json files read are those of queued jobs, once each, when
// they appear (for created_at): the same reads an agent does to index
// incoming/.
package spoolview

import (
	"container/heap"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// Config tunes a View. Zero fields take the defaults.
type Config struct {
	Rescan   time.Duration // full relisting period (default 1m)
	Running  time.Duration // in-progress/ relisting period (default 1s)
	NoNotify bool          // no fsnotify: relistings only
	// OnError, if set, is told about directories that could not be read
	// and about fsnotify falling back to relistings.
	OnError func(error)
}

func (c *Config) defaults() {
	if c.Rescan <= 0 {
		c.Rescan = time.Minute
	}
	if c.Running <= 0 {
		c.Running = time.Second
	}
}

// RunningJob is a job found in in-progress/<agent>/<id>.
type RunningJob struct {
	Agent string `json:"agent"`
	ID    string `json:"id"`
}

// Snapshot is the view at one instant.
type Snapshot struct {
	At time.Time `json:"at"`
	// States counts the job directories of every state (zeros included).
	States map[job.State]int `json:"states"`
	// Agents counts the running jobs of every agent directory of
	// in-progress/ (an idle agent's directory counts 0).
	Agents  map[string]int `json:"agents"`
	Running []RunningJob   `json:"running"`
	Locks   int            `json:"locks"`   // claim locks in incoming/
	Corrupt int            `json:"corrupt"` // quarantined entries in corrupt/
	// OldestQueued is the created_at of the oldest job in incoming/ (zero
	// when nothing is queued).
	OldestQueued time.Time `json:"oldest_queued"`
	// QueuedKinds counts the jobs in incoming/ by the kind their job.json
	// names (read once per job, as for created_at; "" when unreadable).
	// Kinds are anyone's input: a user of the figures bounds them.
	QueuedKinds map[string]int `json:"queued_kinds"`
	// Arrived counts, per state, the jobs seen arriving in its directory
	// since the view started (from events, plus unexplained growth found
	// by relistings). Differences over time give throughput.
	Arrived    map[job.State]uint64 `json:"arrived"`
	LastRescan time.Time            `json:"last_rescan"`
	Ready      bool                 `json:"ready"` // a first full listing is done
}

// Total is the number of jobs in every state.
func (s Snapshot) Total() int {
	n := 0
	for _, c := range s.States {
		n += c
	}
	return n
}

// View is the live view of one spool. Its methods are safe for concurrent
// use; only Run (or Scan) changes it.
type View struct {
	spool *job.Spool
	cfg   Config

	mu         sync.Mutex
	sets       map[job.State]*nameSet // every state but queued and in-progress
	queued     map[uint64]queuedJob   // hash of id -> created_at and kind
	kinds      map[string]*kindCount  // the kinds of queued jobs, each counted once per job
	oldest     ageHeap                // lazily pruned: items not in queued are skipped
	oldestAt   int64
	locks      nameSet
	corrupt    nameSet
	agents     map[string]int
	running    []RunningJob
	arrived    map[job.State]uint64
	lastRescan time.Time
	ready      chan struct{}
	readyOnce  sync.Once
	dirState   map[string]job.State
}

// New returns an empty view of s; Run or Scan fills it.
func New(s *job.Spool, cfg Config) *View {
	cfg.defaults()
	v := &View{
		spool: s, cfg: cfg,
		sets:     map[job.State]*nameSet{},
		queued:   map[uint64]queuedJob{},
		kinds:    map[string]*kindCount{},
		agents:   map[string]int{},
		arrived:  map[job.State]uint64{},
		ready:    make(chan struct{}),
		dirState: map[string]job.State{},
	}
	for _, st := range job.States {
		if st != job.Queued && st != job.InProgress {
			v.sets[st] = &nameSet{}
		}
		if st != job.InProgress {
			v.dirState[s.StateDir(st)] = st
		}
	}
	return v
}

// Ready is closed once the first full listing is done.
func (v *View) Ready() <-chan struct{} { return v.ready }

// Snapshot returns the view now. Its cost does not depend on the size of
// the spool.
func (v *View) Snapshot() Snapshot {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := Snapshot{
		At:     time.Now().UTC(),
		States: make(map[job.State]int, len(job.States)), Agents: make(map[string]int, len(v.agents)),
		Running: slices.Clone(v.running), Locks: v.locks.len(), Corrupt: v.corrupt.len(),
		Arrived: make(map[job.State]uint64, len(job.States)), LastRescan: v.lastRescan,
		QueuedKinds: make(map[string]int, len(v.kinds)),
	}
	for k, c := range v.kinds {
		s.QueuedKinds[k] = c.n
	}
	select {
	case <-v.ready:
		s.Ready = true
	default:
	}
	for _, st := range job.States {
		switch st {
		case job.Queued:
			s.States[st] = len(v.queued)
		case job.InProgress:
			s.States[st] = len(v.running)
		default:
			s.States[st] = v.sets[st].len()
		}
		s.Arrived[st] = v.arrived[st]
	}
	for a, n := range v.agents {
		s.Agents[a] = n
	}
	if v.oldestAt != 0 {
		s.OldestQueued = time.Unix(0, v.oldestAt).UTC()
	}
	return s
}

// Scan lists the whole spool once, synchronously (for one-shot users such
// as `farroctl metrics`).
func (v *View) Scan() error {
	err := errors.Join(v.rescan(), v.listRunning())
	v.readyOnce.Do(func() { close(v.ready) })
	return err
}

// Run keeps the view up to date until ctx is done.
func (v *View) Run(ctx context.Context) error {
	wcfg := fsq.WatchConfig{Rescan: v.cfg.Rescan, NoNotify: v.cfg.NoNotify}
	for d := range v.dirState {
		wcfg.Dirs = append(wcfg.Dirs, d)
	}
	wcfg.Dirs = append(wcfg.Dirs, v.spool.Path(job.CorruptDir))
	slices.Sort(wcfg.Dirs)
	wcfg.OnFallback = func(err error) { v.report(err) }
	watch := fsq.StartWatch(ctx, wcfg)
	defer watch.Stop()
	tick := time.NewTicker(v.cfg.Running)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-watch.Events:
			if ev.Rescan {
				if err := v.Scan(); err != nil {
					v.report(err)
				}
				continue
			}
			v.apply(ev)
		case <-tick.C:
			if err := v.listRunning(); err != nil {
				v.report(err)
			}
		}
	}
}

func (v *View) report(err error) {
	if v.cfg.OnError != nil && err != nil {
		v.cfg.OnError(err)
	}
}

// apply folds one watch event into the view.
func (v *View) apply(ev fsq.Event) {
	if ev.Dir == v.spool.Path(job.CorruptDir) {
		if isNote(ev.Name) {
			return
		}
		v.mu.Lock()
		defer v.mu.Unlock()
		if ev.Created {
			v.corrupt.add(ev.Name)
		} else if ev.Removed {
			v.corrupt.remove(ev.Name)
		}
		return
	}
	st, ok := v.dirState[ev.Dir]
	if !ok {
		return
	}
	if st == job.Queued {
		v.applyQueued(ev)
		return
	}
	if ev.Created && !isDir(filepath.Join(ev.Dir, ev.Name)) {
		return // not a job (fsck reports it); a vanished one is reported removed next
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	set := v.sets[st]
	switch {
	case ev.Created:
		if set.add(ev.Name) {
			v.arrived[st]++
		}
	case ev.Removed:
		set.remove(ev.Name)
	}
}

func (v *View) applyQueued(ev fsq.Event) {
	if strings.HasSuffix(ev.Name, job.LockSuffix) {
		v.mu.Lock()
		defer v.mu.Unlock()
		if ev.Created {
			v.locks.add(ev.Name)
		} else if ev.Removed {
			v.locks.remove(ev.Name)
		}
		return
	}
	h := hashName(ev.Name)
	if ev.Removed {
		v.mu.Lock()
		v.removeQueued(h)
		v.pruneOldest()
		v.mu.Unlock()
		return
	}
	if !ev.Created {
		return
	}
	if _, known := v.queued[h]; known { // only this goroutine writes queued
		return
	}
	at, kind, ok := v.readCreated(ev.Name)
	if !ok {
		return
	}
	v.mu.Lock()
	v.addQueued(h, at, kind)
	v.arrived[job.Queued]++
	v.pruneOldest()
	v.mu.Unlock()
}

// readCreated reads the created_at and kind of incoming/<id>. ok is false
// when the entry is gone or is not a directory; an unreadable job yields 0
// and "" (counted, but not a candidate for the oldest).
func (v *View) readCreated(id string) (int64, string, bool) {
	if job.ValidateID(id) != nil {
		return 0, "", false
	}
	j, err := job.ReadJob(v.spool.JobDir(job.Queued, "", id))
	switch {
	case err == nil:
		return j.CreatedAt.UnixNano(), j.Kind, true
	case errors.Is(err, fsq.ErrVanished):
		return 0, "", false
	}
	return 0, "", isDir(v.spool.JobDir(job.Queued, "", id))
}

// queuedJob is what the view keeps of a queued job: its created_at (unix
// ns, 0: unknown) and its kind's counter, shared by the jobs of that kind.
type queuedJob struct {
	at   int64
	kind *kindCount
}

// kindCount counts the queued jobs of one kind.
type kindCount struct {
	name string
	n    int
}

// addQueued records a queued job; v.mu is held.
func (v *View) addQueued(h uint64, at int64, kind string) {
	if old, known := v.queued[h]; known {
		old.kind.n-- // replaced (not expected: callers skip known jobs)
	}
	kc := v.kinds[kind]
	if kc == nil {
		kc = &kindCount{name: kind}
		v.kinds[kind] = kc
	}
	kc.n++
	v.queued[h] = queuedJob{at: at, kind: kc}
	if at != 0 {
		heap.Push(&v.oldest, ageItem{at: at, h: h})
	}
}

// removeQueued forgets a queued job, and its kind once no queued job has
// it (so that the kinds held are those of the jobs held); v.mu is held.
func (v *View) removeQueued(h uint64) {
	q, ok := v.queued[h]
	if !ok {
		return
	}
	delete(v.queued, h)
	if q.kind.n--; q.kind.n <= 0 {
		delete(v.kinds, q.kind.name)
	}
}

// pruneOldest drops heap items of jobs no longer queued and caches the
// oldest creation time; v.mu is held. Its cost is amortised over the
// removals that made the items stale.
func (v *View) pruneOldest() {
	if v.oldest.Len() > 2*len(v.queued)+1024 {
		h := make(ageHeap, 0, len(v.queued))
		for k, q := range v.queued {
			if q.at != 0 {
				h = append(h, ageItem{at: q.at, h: k})
			}
		}
		heap.Init(&h)
		v.oldest = h
	}
	for v.oldest.Len() > 0 {
		top := v.oldest[0]
		if q, ok := v.queued[top.h]; ok && q.at == top.at {
			v.oldestAt = top.at
			return
		}
		heap.Pop(&v.oldest)
	}
	v.oldestAt = 0
}

// rescan relists every watched directory and replaces its set.
func (v *View) rescan() error {
	var errs []error
	for st, set := range v.sets {
		hashes, err := listHashes(v.spool.StateDir(st))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v.mu.Lock()
		before := set.len()
		set.resetHashes(hashes)
		if grown := set.len() - before; grown > 0 && st.Terminal() {
			v.arrived[st] += uint64(grown) // arrivals no event told of
		}
		v.mu.Unlock()
	}
	if err := v.rescanIncoming(); err != nil {
		errs = append(errs, err)
	}
	if des, err := os.ReadDir(v.spool.Path(job.CorruptDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	} else {
		var names []string
		for _, de := range des {
			if n := de.Name(); !strings.HasPrefix(n, ".") && !isNote(n) {
				names = append(names, n)
			}
		}
		v.mu.Lock()
		v.corrupt.reset(names)
		v.mu.Unlock()
	}
	v.mu.Lock()
	v.lastRescan = time.Now().UTC()
	v.mu.Unlock()
	return errors.Join(errs...)
}

// rescanIncoming relists incoming/: locks, and queued jobs (reading the
// job.json of those not known yet).
func (v *View) rescanIncoming() error {
	es, err := fsq.ScanDir(v.spool.StateDir(job.Queued))
	if err != nil {
		return err
	}
	var lockNames []string
	present := make([]uint64, 0, len(es.Dirs))
	type fresh struct {
		h    uint64
		at   int64
		kind string
	}
	var add []fresh
	for _, name := range es.Dirs {
		if strings.HasSuffix(name, job.LockSuffix) {
			lockNames = append(lockNames, name)
			continue
		}
		h := hashName(name)
		present = append(present, h)
		if _, known := v.queued[h]; known {
			continue
		}
		if at, kind, ok := v.readCreated(name); ok {
			add = append(add, fresh{h, at, kind})
		}
	}
	slices.Sort(present)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.locks.reset(lockNames)
	for h := range v.queued {
		if _, found := slices.BinarySearch(present, h); !found {
			v.removeQueued(h)
		}
	}
	for _, f := range add {
		v.addQueued(f.h, f.at, f.kind)
	}
	v.pruneOldest()
	return nil
}

// listRunning relists in-progress/*/.
func (v *View) listRunning() error {
	agents, err := fsq.ScanDir(v.spool.StateDir(job.InProgress))
	if err != nil {
		return err
	}
	counts := make(map[string]int, len(agents.Dirs))
	var running []RunningJob
	var errs []error
	for _, a := range agents.Dirs {
		es, err := fsq.ScanDir(v.spool.AgentDir(a))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		counts[a] = len(es.Dirs)
		for _, id := range es.Dirs {
			running = append(running, RunningJob{Agent: a, ID: id})
		}
	}
	v.mu.Lock()
	v.agents, v.running = counts, running
	v.mu.Unlock()
	return errors.Join(errs...)
}

func isDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}

// isNote reports a quarantine note (corrupt/<name>.quarantine.json).
func isNote(name string) bool { return strings.HasSuffix(name, ".quarantine.json") }

type ageItem struct {
	at int64
	h  uint64
}

type ageHeap []ageItem

func (h ageHeap) Len() int           { return len(h) }
func (h ageHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h ageHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ageHeap) Push(x any)        { *h = append(*h, x.(ageItem)) }
func (h *ageHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
