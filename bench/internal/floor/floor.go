// Package floor measures the physical floor of farro's design: only the
// raw syscalls of the seed's job lifecycle, with no job model, no JSON
// decoding, no logging and no daemons:
//
//	mkdir incoming/<id>.lock            claim lock
//	create incoming/<id>.lock/pid       owner file
//	rename incoming/<id> in-progress/<id>
//	atomic rewrite of job.json          (temp file beside it, rename over)
//	atomic rewrite of job.json          (the outcome)
//	rename in-progress/<id> completed/<id>
//	unlink pid, rmdir lock
//
// run by W goroutines over jobs queued beforehand, in four durability
// variants (see Variant).
package floor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	"github.com/farro-dev/farro/bench/internal/stats"
	"github.com/farro-dev/farro/bench/internal/sys"
)

// Variant is a durability discipline.
type Variant int

const (
	// NoSync: no fsync at all (not durable; the syscall cost alone).
	NoSync Variant = iota
	// SyncAll: every step durable on its own: each written file fsynced
	// before it is renamed or used, and the parent directory fsynced
	// after every mkdir, create, rename and remove (12 fsyncs per job).
	SyncAll
	// SyncDesign: farro's durability rules without events.jsonl: the lock
	// and its owner file are not fsynced; each rename fsyncs both parent
	// directories, each atomic rewrite fsyncs the file and its directory
	// (8 fsyncs per job).
	SyncDesign
	// Group16: no per-step fsync; one syncfs(2) per 16 completed jobs
	// (and one at the end, inside the timing). Jobs finished since the
	// last syncfs may run again after a power cut (at-least-once), but
	// none is lost or held twice.
	Group16
)

// Experiments: models of farro's protocol today and of a proposed one,
// for the lead's decision (not part of the floor).
const (
	// FarroModel is farro's claim and commit as raw syscalls, without the
	// job model, JSON, logging or daemons: SyncDesign plus the two
	// events.jsonl appends (each fsynced) and reads of job.json and
	// prompt.json at claim (10 fsyncs per job).
	FarroModel Variant = iota + Group16 + 1
	// ProposedAsync: claim by rename of the job directory straight into
	// in-progress/<agent>/ (no lock directory, no owner file per job: the
	// agent's identity is written once per agent), no job.json rewrite at
	// claim, the outcome written as a new file (outcome.json, O_EXCL: no
	// inode replaced), rename to completed/; durability by one syncfs per
	// batch from a committer goroutine (natural group commit: a batch is
	// whatever finished while the previous syncfs ran); workers go on
	// without waiting (at-least-once, like River's async completer).
	ProposedAsync
	// ProposedSync: ProposedAsync, but each worker waits until the syncfs
	// covering its commit has returned before it claims the next job.
	ProposedSync
)

// Variants in report order.
var Variants = []Variant{NoSync, SyncAll, SyncDesign, Group16}

// Experiments in report order.
var Experiments = []Variant{FarroModel, ProposedSync, ProposedAsync}

func (v Variant) String() string {
	return [...]string{"no fsync", "fsync everything", "fsync as farro's rules", "group commit: 1 syncfs / 16 jobs",
		"farro's protocol today as raw syscalls", "proposed: rename-claim, outcome file, group commit, async ack",
		"proposed: same, each worker waits for its ack"}[v]
}

// Key is a short name for reports.
func (v Variant) Key() string {
	return [...]string{"nosync", "syncall", "syncdesign", "group16", "farromodel", "propasync", "propsync"}[v]
}

// Result of one throughput run.
type Result struct {
	Jobs    int
	Elapsed time.Duration
	Syncs   int64 // fsync + syncfs calls
}

// Rate is jobs per second.
func (r Result) Rate() float64 { return float64(r.Jobs) / r.Elapsed.Seconds() }

// SyncsPerJob is the number of fsync/syncfs calls per job.
func (r Result) SyncsPerJob() float64 { return float64(r.Syncs) / float64(r.Jobs) }

type run struct {
	root, inc, prog, done string
	v                     Variant
	incF, progF, doneF    *os.File
	rootF                 *os.File
	syncs, completed      atomic.Int64
	pid                   []byte
	agentDir              string
	agentF                *os.File

	// group commit (Proposed*): tickets handed out and made durable
	cmu              sync.Mutex
	ccond            *sync.Cond
	enqueued, synced int64
	cstop            bool
}

func jobJSON(id, status string) []byte {
	return fmt.Appendf(nil, `{
  "schema_version": "1.0.0",
  "id": %q,
  "kind": "noop",
  "status": %q,
  "priority": 0,
  "attempts": 1,
  "max_attempts": 0,
  "created_at": "2026-01-01T00:00:00.000000Z",
  "updated_at": %q,
  "agent": "floor",
  "correlation_id": "%s/1-abcdef",
  "started_at": "2026-01-01T00:00:00.000000Z",
  "last_heartbeat": "2026-01-01T00:00:00.000000Z"
}
`, id, status, time.Now().UTC().Format(time.RFC3339Nano), id)
}

func newRun(base string, v Variant) (*run, error) {
	root, err := os.MkdirTemp(base, "floor-")
	if err != nil {
		return nil, err
	}
	r := &run{root: root, v: v, inc: filepath.Join(root, "incoming"), prog: filepath.Join(root, "in-progress"), done: filepath.Join(root, "completed"),
		pid: fmt.Appendf(nil, `{"pid":%d,"host":"bench"}`+"\n", os.Getpid())}
	for _, d := range []string{r.inc, r.prog, r.done, filepath.Join(root, "tmp")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	r.agentDir = filepath.Join(r.prog, "agent")
	if err := os.Mkdir(r.agentDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(r.agentDir, ".owner"), r.pid, 0o644); err != nil {
		return nil, err
	}
	r.ccond = sync.NewCond(&r.cmu)
	for _, p := range []struct {
		f   **os.File
		dir string
	}{{&r.incF, r.inc}, {&r.progF, r.prog}, {&r.doneF, r.done}, {&r.rootF, root}, {&r.agentF, r.agentDir}} {
		if *p.f, err = os.Open(p.dir); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *run) close() {
	for _, f := range []*os.File{r.incF, r.progF, r.doneF, r.rootF, r.agentF} {
		if f != nil {
			f.Close()
		}
	}
}

func (r *run) fsync(f *os.File) error {
	r.syncs.Add(1)
	return f.Sync()
}

func (r *run) fsyncPath(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return r.fsync(f)
}

func (r *run) syncfs() error {
	r.syncs.Add(1)
	return unix.Syncfs(int(r.rootF.Fd()))
}

// fill queues n jobs (job.json + prompt.json) in incoming/, then syncfs:
// they exist before the clock starts, as in every burn-down.
func (r *run) fill(n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("j%08d", i)
	}
	var wg sync.WaitGroup
	var firstErr atomic.Value
	const par = 4
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += par {
				d := filepath.Join(r.inc, ids[i])
				err := os.Mkdir(d, 0o755)
				if err == nil {
					err = os.WriteFile(filepath.Join(d, "job.json"), jobJSON(ids[i], "queued"), 0o644)
				}
				if err == nil {
					err = os.WriteFile(filepath.Join(d, "prompt.json"), []byte("{}\n"), 0o644)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, err
	}
	return ids, sys.Syncfs(r.root)
}

func (r *run) writeAtomic(dir, name string, data []byte, sync bool) error {
	tmp := filepath.Join(dir, "."+name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := r.fsync(f); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	if sync {
		return r.fsyncPath(dir)
	}
	return nil
}

// lifecycle runs one job through the seed's lifecycle.
func (r *run) lifecycle(id string) error {
	switch r.v {
	case FarroModel:
		return r.farroModel(id)
	case ProposedAsync, ProposedSync:
		return r.proposed(id)
	}
	all, design := r.v == SyncAll, r.v == SyncDesign
	lock := filepath.Join(r.inc, id+".lock")
	if err := os.Mkdir(lock, 0o755); err != nil {
		return err
	}
	if all {
		if err := r.fsync(r.incF); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(lock, "pid"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(r.pid); err != nil {
		f.Close()
		return err
	}
	if all {
		if err := r.fsync(f); err != nil {
			f.Close()
			return err
		}
	}
	f.Close()
	if all {
		if err := r.fsyncPath(lock); err != nil {
			return err
		}
	}
	dst := filepath.Join(r.prog, id)
	if err := os.Rename(filepath.Join(r.inc, id), dst); err != nil {
		return err
	}
	if all || design {
		if err := r.fsync(r.progF); err != nil {
			return err
		}
		if err := r.fsync(r.incF); err != nil {
			return err
		}
	}
	if err := r.writeAtomic(dst, "job.json", jobJSON(id, "in-progress"), all || design); err != nil {
		return err
	}
	if err := r.writeAtomic(dst, "job.json", jobJSON(id, "succeeded"), all || design); err != nil {
		return err
	}
	if err := os.Rename(dst, filepath.Join(r.done, id)); err != nil {
		return err
	}
	if all || design {
		if err := r.fsync(r.doneF); err != nil {
			return err
		}
		if err := r.fsync(r.progF); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(lock, "pid")); err != nil {
		return err
	}
	if err := os.Remove(lock); err != nil {
		return err
	}
	if all {
		if err := r.fsync(r.incF); err != nil {
			return err
		}
	}
	if c := r.completed.Add(1); r.v == Group16 && c%16 == 0 {
		return r.syncfs()
	}
	return nil
}

// Bench is a floor spool with jobs queued in it, reused by the variants:
// after each run the jobs go back to incoming/ (untimed).
type Bench struct {
	r   *run
	ids []string
}

// NewBench queues n jobs in a new floor spool under base.
func NewBench(base string, n int) (*Bench, error) {
	r, err := newRun(base, NoSync)
	if err != nil {
		return nil, err
	}
	ids, err := r.fill(n)
	if err != nil {
		r.close()
		_ = sys.RemoveTree(r.root)
		return nil, fmt.Errorf("floor fill: %w", err)
	}
	return &Bench{r: r, ids: ids}, nil
}

// Close removes the spool.
func (b *Bench) Close() {
	b.r.close()
	_ = sys.RemoveTree(b.r.root)
}

// Throughput queues n jobs under base, then runs them in variant v (see
// Bench.Run).
func Throughput(base string, v Variant, n, workers int, maxTime time.Duration) (Result, error) {
	b, err := NewBench(base, n)
	if err != nil {
		return Result{}, err
	}
	defer b.Close()
	return b.Run(v, workers, maxTime)
}

// Run runs the queued jobs with workers goroutines in variant v. It stops
// early (with fewer jobs) after maxTime, so that slow variants keep the
// run short; the rate is what it measures either way. Then it puts the
// jobs back into incoming/ for the next run.
func (b *Bench) Run(v Variant, workers int, maxTime time.Duration) (Result, error) {
	r, ids := b.r, b.ids
	r.v = v
	r.syncs.Store(0)
	r.completed.Store(0)
	r.enqueued, r.synced, r.cstop = 0, 0, false
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	committerDone := make(chan error, 1)
	if r.v == ProposedAsync || r.v == ProposedSync {
		go func() { committerDone <- r.committer() }()
	}
	deadline := start.Add(maxTime)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(ids)) || (maxTime > 0 && time.Now().After(deadline)) {
					return
				}
				if err := r.lifecycle(ids[i]); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return Result{}, fmt.Errorf("floor %s: %w", v, err)
	}
	if v == Group16 {
		if err := r.syncfs(); err != nil {
			return Result{}, err
		}
	}
	if r.v == ProposedAsync || r.v == ProposedSync {
		r.cmu.Lock()
		for r.synced < r.enqueued {
			r.ccond.Wait()
		}
		r.cstop = true
		r.ccond.Broadcast()
		r.cmu.Unlock()
		if err := <-committerDone; err != nil {
			return Result{}, err
		}
	}
	el := time.Since(start)
	res := Result{Jobs: int(r.completed.Load()), Elapsed: el, Syncs: r.syncs.Load()}
	return res, b.requeue()
}

// requeue moves every completed job back to incoming/ and drops what the
// variants added to it (outcome.json, events.jsonl).
func (b *Bench) requeue() error {
	r := b.r
	for _, id := range b.ids {
		src := filepath.Join(r.done, id)
		if _, err := os.Lstat(src); err != nil {
			continue
		}
		for _, f := range []string{"outcome.json", "events.jsonl"} {
			if err := os.Remove(filepath.Join(src, f)); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		if err := os.Rename(src, filepath.Join(r.inc, id)); err != nil {
			return err
		}
	}
	return sys.Syncfs(r.root)
}

// Pickup measures the floor's pickup latency on an idle queue: a durable
// submit (job.json and prompt.json written and fsynced in tmp/, the
// directory fsynced, renamed into incoming/, both directories fsynced) seen
// through inotify by a waiting worker, which claims it (mkdir lock, owner
// file, rename to in-progress, both directories fsynced). Latency runs
// from the start of the submit to the end of the claim.
func Pickup(base string, probes int) (stats.Latency, error) {
	r, err := newRun(base, SyncDesign)
	if err != nil {
		return stats.Latency{}, err
	}
	defer func() { r.close(); _ = sys.RemoveTree(r.root) }()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return stats.Latency{}, err
	}
	defer w.Close()
	if err := w.Add(r.inc); err != nil {
		return stats.Latency{}, err
	}
	claimed := make(chan time.Time, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-w.Events:
				name := filepath.Base(ev.Name)
				if !ev.Has(fsnotify.Create) || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".lock") {
					continue
				}
				if err := r.claim(name); err != nil {
					errc <- err
					return
				}
				claimed <- time.Now()
			}
		}
	}()
	var lat []time.Duration
	for i := 0; i < probes; i++ {
		id := fmt.Sprintf("p%06d", i)
		t0 := time.Now()
		if err := r.submit(id); err != nil {
			return stats.Latency{}, err
		}
		select {
		case t := <-claimed:
			lat = append(lat, t.Sub(t0))
		case err := <-errc:
			return stats.Latency{}, err
		case <-time.After(10 * time.Second):
			return stats.Latency{}, errors.New("floor pickup: no claim within 10s")
		}
		time.Sleep(stats.ProbeGap())
	}
	return stats.Lat(lat), nil
}

func (r *run) submit(id string) error {
	tmp := filepath.Join(r.root, "tmp", id)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"job.json": jobJSON(id, "queued"), "prompt.json": []byte("{}\n")} {
		f, err := os.OpenFile(filepath.Join(tmp, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	if err := r.fsyncPath(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(r.inc, id)); err != nil {
		return err
	}
	if err := r.fsync(r.incF); err != nil {
		return err
	}
	return r.fsyncPath(filepath.Join(r.root, "tmp"))
}

func (r *run) claim(id string) error {
	lock := filepath.Join(r.inc, id+".lock")
	if err := os.Mkdir(lock, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(lock, "pid"), r.pid, 0o644); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(r.inc, id), filepath.Join(r.prog, id)); err != nil {
		return err
	}
	if err := r.fsync(r.progF); err != nil {
		return err
	}
	return r.fsync(r.incF)
}

// farroModel is farro's Claim and Commit (pkg/job) as raw syscalls.
func (r *run) farroModel(id string) error {
	lock := filepath.Join(r.inc, id+".lock")
	if err := os.Mkdir(lock, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(lock, "owner"), r.pid, 0o644); err != nil {
		return err
	}
	src := filepath.Join(r.inc, id)
	if _, err := os.ReadFile(filepath.Join(src, "job.json")); err != nil {
		return err
	}
	if _, err := os.ReadFile(filepath.Join(src, "prompt.json")); err != nil {
		return err
	}
	dst := filepath.Join(r.agentDir, id)
	if err := os.Rename(src, dst); err != nil {
		return err
	}
	if err := r.fsync(r.agentF); err != nil {
		return err
	}
	if err := r.fsync(r.incF); err != nil {
		return err
	}
	if err := r.writeAtomic(dst, "job.json", jobJSON(id, "in-progress"), true); err != nil {
		return err
	}
	if err := r.appendSync(filepath.Join(dst, "events.jsonl"), `{"to":"in-progress"}`); err != nil {
		return err
	}
	if err := r.writeAtomic(dst, "job.json", jobJSON(id, "succeeded"), true); err != nil {
		return err
	}
	if err := r.appendSync(filepath.Join(dst, "events.jsonl"), `{"to":"succeeded"}`); err != nil {
		return err
	}
	if err := os.Rename(dst, filepath.Join(r.done, id)); err != nil {
		return err
	}
	if err := r.fsync(r.doneF); err != nil {
		return err
	}
	if err := r.fsync(r.agentF); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(lock, "owner")); err != nil {
		return err
	}
	if err := os.Remove(lock); err != nil {
		return err
	}
	r.completed.Add(1)
	return nil
}

func (r *run) appendSync(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if err == nil {
		err = r.fsync(f)
	}
	f.Close()
	return err
}

// proposed is the proposed protocol: two renames and one new file per
// job, made durable by the committer's group syncfs.
func (r *run) proposed(id string) error {
	dst := filepath.Join(r.agentDir, id)
	if err := os.Rename(filepath.Join(r.inc, id), dst); err != nil {
		return err // ENOENT: another agent won the claim
	}
	if _, err := os.ReadFile(filepath.Join(dst, "job.json")); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dst, "outcome.json"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(jobJSON(id, "succeeded"))
	f.Close()
	if err != nil {
		return err
	}
	if err := os.Rename(dst, filepath.Join(r.done, id)); err != nil {
		return err
	}
	r.completed.Add(1)
	r.cmu.Lock()
	r.enqueued++
	ticket := r.enqueued
	r.ccond.Broadcast()
	if r.v == ProposedSync {
		for r.synced < ticket {
			r.ccond.Wait()
		}
	}
	r.cmu.Unlock()
	return nil
}

// committer makes batches of commits durable with one syncfs each.
func (r *run) committer() error {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	for {
		for r.synced == r.enqueued && !r.cstop {
			r.ccond.Wait()
		}
		if r.cstop {
			return nil
		}
		target := r.enqueued
		r.cmu.Unlock()
		err := r.syncfs()
		r.cmu.Lock()
		if err != nil {
			return err
		}
		r.synced = target
		r.ccond.Broadcast()
	}
}
