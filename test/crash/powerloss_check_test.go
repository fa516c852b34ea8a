package crash

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/manager"
	"github.com/farro-dev/farro/internal/watchdog"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// plRecovers is what recovery (watchdogd, then managerd's policy) may
// legitimately make of a job durably in a state: the state itself, or a
// state reachable by the transitions recovery and the retry policy make
// (in-progress -> stale, stale -> queued/deferred/killed, failed ->
// deferred/queued/killed, deferred -> queued). Never an earlier state, and
// never a terminal state from a non-terminal one except killed by policy.
// An in-progress job is not expected to stay in-progress: its holder died
// with the power.
var plRecovers = map[string][]string{
	string(job.Queued):     {"queued"},
	string(job.InProgress): {"stale", "queued", "deferred", "killed"},
	string(job.Stale):      {"stale", "queued", "deferred", "killed"},
	string(job.Failed):     {"failed", "deferred", "queued", "killed"},
	string(job.Deferred):   {"deferred", "queued"},
	string(job.Held):       {"held"},
	string(job.Succeeded):  {"succeeded"},
	string(job.Killed):     {"killed"},
	plGone:                 {plGone},
	plCorrupt:              {plCorrupt},
}

// plExpect is what the client knew at a cut: which jobs it had started to
// submit (known), which submits had returned (acked), and in which states
// each job may be found after recovery.
type plExpect struct {
	known   map[string]bool
	acked   map[string]bool
	allowed map[string]map[string]bool
	sig     string
}

// expect derives the expectations at cut c from the marks: for each job
// the states of its last acknowledged transaction and of the transactions
// begun since (not yet returned), each closed under plRecovers.
func (l *plLog) expect(c int) *plExpect {
	e := &plExpect{known: map[string]bool{}, acked: map[string]bool{}, allowed: map[string]map[string]bool{}}
	last := map[string][]string{}
	flight := map[string][]string{}
	for _, m := range l.marks {
		if m.pos > c {
			continue
		}
		e.known[m.job] = true
		if m.ack {
			e.acked[m.job] = true
			last[m.job] = m.states
			flight[m.job] = nil
		} else {
			flight[m.job] = append(flight[m.job], m.states...)
		}
	}
	var sig []string
	for id := range e.known {
		al := map[string]bool{}
		for _, s := range append(append([]string(nil), last[id]...), flight[id]...) {
			for _, r := range plRecovers[s] {
				al[r] = true
			}
		}
		if !e.acked[id] {
			al[plGone] = true
		}
		e.allowed[id] = al
		var as []string
		for s := range al {
			as = append(as, s)
		}
		sort.Strings(as)
		sig = append(sig, fmt.Sprintf("%s:%v:%s", id, e.acked[id], strings.Join(as, ",")))
	}
	sort.Strings(sig)
	e.sig = strings.Join(sig, ";")
	return e
}

// plCounts are the checker's counts (issue 3, item 6) for power-loss
// states, summed over every state checked.
type plCounts struct {
	Lost       int // acknowledged, and absent (or only in corrupt/) after recovery
	Duplicated int // in two places (state directories, corrupt/)
	Unexpected int // a job nobody started to submit, or a stray entry in a state directory
	Unreadable int // a job.json that does not parse, before or after recovery
	Orphans    int // after recovery: a lock, a tmp/ entry, a temp file, an in-progress job
	Regressed  int // state not reachable from what was acknowledged, or status != directory

	// The parts of Orphans, for the package summary's finer counts.
	OrphanLocks, OrphanTemps, Stuck int
}

func (c *plCounts) add(o plCounts) {
	c.Lost += o.Lost
	c.Duplicated += o.Duplicated
	c.Unexpected += o.Unexpected
	c.Unreadable += o.Unreadable
	c.Orphans += o.Orphans
	c.Regressed += o.Regressed
	c.OrphanLocks += o.OrphanLocks
	c.OrphanTemps += o.OrphanTemps
	c.Stuck += o.Stuck
}

func (c plCounts) violations() int {
	return c.Lost + c.Duplicated + c.Unexpected + c.Unreadable + c.Orphans + c.Regressed
}

// plPreviousBoot replaces the boot id in surviving owner files: the power
// cut rebooted the machine, so every lock names a process of another boot.
const plPreviousBoot = "00000000-0000-0000-0000-power-loss-cut"

// plBackdate is how long ago everything on disk was last modified when
// recovery runs: longer than watchdogd's lock grace (5s) and managerd's
// tmp/ max age (1h), as after a reboot followed by an hour of running
// daemons.
const plBackdate = 2 * time.Hour

var plCorruptName = regexp.MustCompile(`^(.*)\.\d{8}T\d{6}\.\d{6}Z$`)

// plCheck materializes tree under dir, runs recovery as a restarted system
// would (watchdogd's first pass with its startup reconcile, then managerd's
// pass, repeated until nothing changes), and checks the invariants.
func plCheck(dir string, tree *plTree, exp *plExpect) (plCounts, []string, error) {
	var cnt plCounts
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	root := filepath.Join(dir, "spool")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return cnt, nil, err
	}
	if err := tree.write(root); err != nil {
		return cnt, nil, err
	}

	// Before recovery: every job.json in a state directory must parse.
	pre, err := plScan(root)
	if err != nil {
		return cnt, nil, err
	}
	for id, ps := range pre.places {
		for _, p := range ps {
			if _, err := job.ReadJob(p.dir); err != nil && !errors.Is(err, job.ErrSchema) && !exp.allowed[id][plCorrupt] {
				cnt.Unreadable++
				note("unreadable before recovery: %s: %v", plRel(root, p.dir), err)
			}
		}
	}

	if err := plReboot(root); err != nil {
		return cnt, nil, err
	}
	var logs bytes.Buffer
	log := zerolog.New(&logs).Level(zerolog.DebugLevel)
	s, err := job.Open(root)
	if err != nil {
		return cnt, nil, err
	}
	ctx := context.Background()
	wd := watchdog.New(spoolstore.New(s), watchdog.Config{}, log.With().Str("app", "watchdogd").Logger())
	mg := manager.New(spoolstore.New(s), manager.Config{}, log.With().Str("app", "managerd").Logger())
	prev := [32]byte{}
	for round := 0; round < 3; round++ {
		if err := wd.RunOnce(ctx); err != nil {
			note("watchdogd pass: %v", err)
		}
		if err := mg.RunOnce(ctx); err != nil {
			note("managerd pass: %v", err)
		}
		t, _, err := plReadTree(root)
		if err != nil {
			return cnt, nil, err
		}
		h := t.hash()
		if h == prev {
			break
		}
		prev = h
	}

	post, err := plScan(root)
	if err != nil {
		return cnt, nil, err
	}
	cnt.Unexpected += len(post.stray)
	for _, p := range post.stray {
		note("stray entry after recovery: %s", p)
	}
	cnt.OrphanLocks += len(post.locks)
	cnt.OrphanTemps += len(post.tmp) + len(post.temps)
	for _, p := range append(append(append([]string(nil), post.locks...), post.tmp...), post.temps...) {
		note("orphan after recovery: %s", p)
	}
	ids := map[string]bool{}
	for id := range post.places {
		ids[id] = true
	}
	for id := range post.corrupt {
		ids[id] = true
	}
	for id := range exp.known {
		ids[id] = true
	}
	for id := range ids {
		places, inCorrupt := post.places[id], post.corrupt[id]
		al := exp.allowed[id]
		switch n := len(places) + inCorrupt; {
		case !exp.known[id]:
			cnt.Unexpected++
			note("unexpected job %s", id)
		case n > 1:
			cnt.Duplicated++
			note("job %s in %d places", id, n)
		case n == 0:
			if exp.acked[id] && !al[plGone] {
				cnt.Lost++
				note("acknowledged job %s lost", id)
			}
		case inCorrupt == 1:
			if !al[plCorrupt] {
				cnt.Lost++
				note("acknowledged job %s quarantined to corrupt/", id)
			}
		default:
			p := places[0]
			j, err := job.ReadJob(p.dir)
			switch {
			case err != nil:
				cnt.Unreadable++
				note("unreadable after recovery: %s: %v", plRel(root, p.dir), err)
			case p.state == job.InProgress:
				cnt.Stuck++
				note("job %s still in-progress after recovery", id)
			case j.Status != p.state:
				cnt.Regressed++
				note("job %s: status %s in %s/", id, j.Status, p.state.Dir())
			case !al[string(p.state)]:
				cnt.Regressed++
				note("job %s %s after recovery; allowed %v", id, p.state, plKeys(al))
			}
		}
	}
	cnt.Orphans = cnt.OrphanLocks + cnt.OrphanTemps + cnt.Stuck
	if cnt.violations() > 0 && logs.Len() > 0 {
		note("recovery log:\n%s", logs.String())
	}
	return cnt, notes, nil
}

func plRel(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return r
}

func plKeys(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// plReboot makes the materialized spool look like the disk of a machine
// that rebooted after the cut and whose daemons have been running for a
// while: owner files name the previous boot, and every mtime is
// plBackdate old.
func plReboot(root string) error {
	incoming := filepath.Join(root, job.Queued.Dir())
	des, err := os.ReadDir(incoming)
	if err != nil {
		return err
	}
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), job.LockSuffix) {
			continue
		}
		p := filepath.Join(incoming, de.Name(), "owner")
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var m map[string]any
		if json.Unmarshal(b, &m) != nil {
			continue // torn or empty: unreadable, judged by age
		}
		if _, ok := m["boot_id"]; ok {
			m["boot_id"] = plPreviousBoot
			nb, _ := json.Marshal(m)
			if err := os.WriteFile(p, append(nb, '\n'), 0o644); err != nil {
				return err
			}
		}
	}
	old := time.Now().Add(-plBackdate)
	var paths []string
	if err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	}); err != nil {
		return err
	}
	for i := len(paths) - 1; i >= 0; i-- {
		if err := os.Chtimes(paths[i], old, old); err != nil {
			return err
		}
	}
	return nil
}

type plPlace struct {
	state job.State
	dir   string
}

type plScanResult struct {
	places  map[string][]plPlace
	corrupt map[string]int
	locks   []string // incoming/<id>.lock
	tmp     []string // tmp/ entries
	temps   []string // temp files of atomic writes (dot files) in job directories and corrupt/
	stray   []string // anything else that cannot be a job
}

// plScan lists every place a job can be.
func plScan(root string) (*plScanResult, error) {
	r := &plScanResult{places: map[string][]plPlace{}, corrupt: map[string]int{}}
	addJob := func(st job.State, dir, name string, isDir bool) {
		p := filepath.Join(dir, name)
		if !isDir || job.ValidateID(name) != nil {
			r.stray = append(r.stray, plRel(root, p))
			return
		}
		r.places[name] = append(r.places[name], plPlace{state: st, dir: p})
		des, _ := os.ReadDir(p)
		for _, de := range des {
			if strings.HasPrefix(de.Name(), ".") {
				r.temps = append(r.temps, plRel(root, filepath.Join(p, de.Name())))
			}
		}
	}
	for _, st := range job.States {
		sd := filepath.Join(root, st.Dir())
		des, err := os.ReadDir(sd)
		if err != nil {
			return nil, err
		}
		for _, de := range des {
			name := de.Name()
			switch {
			case st == job.Queued && strings.HasSuffix(name, job.LockSuffix):
				r.locks = append(r.locks, plRel(root, filepath.Join(sd, name)))
			case st == job.Queued && name == job.PriorityHintDir && de.IsDir():
				// Priority hints: only a hint, whether or not its job
				// survived the cut; anything else in there is stray.
				hes, err := os.ReadDir(filepath.Join(sd, name))
				if err != nil {
					return nil, err
				}
				for _, he := range hes {
					if _, _, ok := job.ParseHint(he.Name()); !ok || !he.Type().IsRegular() {
						r.stray = append(r.stray, plRel(root, filepath.Join(sd, name, he.Name())))
					}
				}
			case st == job.InProgress && de.IsDir():
				ad := filepath.Join(sd, name)
				jes, err := os.ReadDir(ad)
				if err != nil {
					return nil, err
				}
				for _, je := range jes {
					if je.Name() == job.PoolDir && je.IsDir() {
						continue // the agent's spare lock directories (fsq.LockPool)
					}
					addJob(st, ad, je.Name(), je.IsDir())
				}
			case st == job.InProgress:
				r.stray = append(r.stray, plRel(root, filepath.Join(sd, name)))
			default:
				addJob(st, sd, name, de.IsDir())
			}
		}
	}
	// completed/ holds only the three state directories.
	if des, err := os.ReadDir(filepath.Join(root, "completed")); err == nil {
		for _, de := range des {
			switch de.Name() {
			case "succeeded", "failed", "killed":
			default:
				r.stray = append(r.stray, "completed/"+de.Name())
			}
		}
	}
	des, err := os.ReadDir(filepath.Join(root, job.TmpDir))
	if err != nil {
		return nil, err
	}
	for _, de := range des {
		r.tmp = append(r.tmp, job.TmpDir+"/"+de.Name())
	}
	des, err = os.ReadDir(filepath.Join(root, job.CorruptDir))
	if err != nil {
		return nil, err
	}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".") {
			r.temps = append(r.temps, job.CorruptDir+"/"+de.Name())
			continue
		}
		if strings.HasSuffix(de.Name(), ".quarantine.json") {
			continue
		}
		m := plCorruptName.FindStringSubmatch(de.Name())
		if m == nil {
			r.stray = append(r.stray, job.CorruptDir+"/"+de.Name())
			continue
		}
		r.corrupt[m[1]]++
	}
	return r, nil
}

// plRun enumerates and checks the power-loss states of recorded logs.
type plRun struct {
	bound   int // combinations per cut before sampling
	workers int
	from    int // first cut to check (cuts before it are skipped)

	mu         sync.Mutex
	prefixes   int
	enumerated int // combinations produced
	checked    int // distinct states materialized, recovered and checked
	sampled    int // cuts whose combinations were sampled
	maxPending int
	counts     plCounts
	notes      []string
	seen       map[string]bool
	perLog     map[string]plCounts
	errs       []error
}

func newPLRun(bound, workers int) *plRun {
	return &plRun{bound: bound, workers: workers, seen: map[string]bool{}, perLog: map[string]plCounts{}}
}

type plTask struct {
	log  string
	cut  int
	tree *plTree
	exp  *plExpect
}

// check enumerates every cut of every log and checks each distinct state
// with r.workers workers, each in its own scratch directory under tmp.
func (r *plRun) check(tmp string, logs []*plLog) {
	tasks := make(chan plTask, 4*r.workers)
	var wg sync.WaitGroup
	for w := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for tk := range tasks {
				n++
				dir := filepath.Join(tmp, fmt.Sprintf("w%d-%d", w, n))
				cnt, notes, err := plCheck(dir, tk.tree, tk.exp)
				if keep := os.Getenv("FARRO_PL_KEEP"); keep != "" && cnt.violations() > 0 {
					// Keep the recovered spool of a failing state for inspection.
					_ = os.Rename(dir, filepath.Join(keep, fmt.Sprintf("%s-%d-w%d-%d", strings.ReplaceAll(tk.log, "/", "_"), tk.cut, w, n)))
				}
				_ = os.RemoveAll(dir)
				r.mu.Lock()
				r.checked++
				if err != nil {
					r.errs = append(r.errs, fmt.Errorf("%s cut %d: %w", tk.log, tk.cut, err))
				}
				r.counts.add(cnt)
				pc := r.perLog[tk.log]
				pc.add(cnt)
				r.perLog[tk.log] = pc
				if cnt.violations() > 0 && len(r.notes) < 20 {
					r.notes = append(r.notes, fmt.Sprintf("%s, power cut after %d ops:\n  %s", tk.log, tk.cut, strings.Join(notes, "\n  ")))
				}
				r.mu.Unlock()
			}
		}()
	}
	for li, l := range logs {
		a := l.analyse()
		for c := r.from; c <= len(l.ops); c++ {
			exp := l.expect(c)
			st := l.enumerate(a, c, r.bound, uint64(li)+1, func(s plState) {
				key := fmt.Sprintf("%x|%s", s.hash, exp.sig)
				r.mu.Lock()
				dup := r.seen[key]
				r.seen[key] = true
				r.mu.Unlock()
				if !dup {
					tasks <- plTask{log: l.name, cut: c, tree: s.tree, exp: exp}
				}
			})
			r.mu.Lock()
			r.prefixes++
			r.enumerated += st.combos
			if st.sampled {
				r.sampled++
			}
			r.maxPending = max(r.maxPending, st.pending)
			r.mu.Unlock()
		}
	}
	close(tasks)
	wg.Wait()
}

func (r *plRun) summary() string {
	c := r.counts
	return fmt.Sprintf("powerloss: %d prefixes, %d states checked, lost=%d duplicated=%d unexpected=%d unreadable=%d orphans=%d regressed=%d",
		r.prefixes, r.checked, c.Lost, c.Duplicated, c.Unexpected, c.Unreadable, c.Orphans, c.Regressed)
}
