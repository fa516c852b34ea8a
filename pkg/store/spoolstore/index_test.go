package spoolstore

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// submitMany submits reqs in one group commit and returns the jobs.
func submitMany(t testing.TB, s *job.Spool, reqs []job.SubmitRequest) []*job.Job {
	t.Helper()
	jobs, errs := s.SubmitMany(reqs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	return jobs
}

// queuedKeys reads the claim-order keys of every job in incoming/.
func queuedKeys(t *testing.T, s *job.Spool) map[string]cand {
	t.Helper()
	ids, err := os.ReadDir(s.StateDir(job.Queued))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]cand{}
	for _, de := range ids {
		if strings.HasPrefix(de.Name(), ".") || strings.HasSuffix(de.Name(), job.LockSuffix) {
			continue
		}
		j, err := job.ReadJob(s.JobDir(job.Queued, "", de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[j.ID] = cand{id: j.ID, priority: int32(j.Priority), created: j.CreatedAt.UnixNano()}
	}
	return out
}

// bestOf is the id claimed first among keys.
func bestOf(keys map[string]cand) string {
	var best *cand
	for _, c := range keys {
		if best == nil || c.before(best) {
			best = &c
		}
	}
	if best == nil {
		return ""
	}
	return best.id
}

// drain takes every candidate from x as the agent would (a scan first,
// a refill when the index asks for one), claims each (moves it out of
// incoming/) and checks, at every step, that the index holds no more
// than its bound and, if strict, that it gave the best job left in
// incoming/. after, if set, runs after the n-th claim.
func drain(t *testing.T, s *job.Spool, x *index, strict bool, after map[int]func()) []string {
	t.Helper()
	if err := x.rescan(); err != nil {
		t.Fatal(err)
	}
	var got []string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if f := after[len(got)]; f != nil {
			delete(after, len(got))
			f()
		}
		want := bestOf(queuedKeys(t, s))
		c, ok := x.tryNext(nil, nil)
		if n := x.len(); n > 2*x.cap {
			t.Fatalf("index holds %d candidates, over twice its cap %d", n, x.cap)
		}
		if !ok {
			x.mu.Lock()
			more := x.more
			x.mu.Unlock()
			if !more {
				if want != "" {
					t.Fatalf("index empty and says nothing more, but %s is queued", want)
				}
				return got
			}
			if _, err := x.refill(false); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if strict && c.id != want {
			t.Fatalf("claim %d: index gave %s, the best queued job is %s", len(got), c.id, want)
		}
		got = append(got, c.id)
		if err := os.Rename(s.JobDir(job.Queued, "", c.id), s.Path(job.TmpDir, c.id)); err != nil {
			t.Fatal(err)
		}
		x.forget(c.id, false)
	}
	t.Fatal("drain did not finish")
	return nil
}

func requests(n int, prio func(i int) int) []job.SubmitRequest {
	reqs := make([]job.SubmitRequest, n)
	for i := range reqs {
		reqs[i] = job.SubmitRequest{Kind: "noop", Priority: prio(i), Prompt: []byte(`{}`)}
	}
	return reqs
}

// With a cap far below the queue, the index hands out every job, each
// the best one queued at that moment, jobs that arrive meanwhile (some
// better than all the others) included.
func TestIndexBoundedKeepsOrderAndForgetsNothing(t *testing.T) {
	t.Parallel()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	jobs := submitMany(t, s, requests(60, func(i int) int { return i*7%5 - 1 }))
	// Two jobs with IDs that carry no time: ordered by job.json once read.
	submitMany(t, s, []job.SubmitRequest{
		{ID: "zz-custom", Kind: "noop", Priority: 2, Prompt: []byte(`{}`)},
		{ID: "aa-custom", Kind: "noop", Prompt: []byte(`{}`)},
	})
	x := newIndex(s)
	x.cap = 4
	if err := x.rescan(); err != nil {
		t.Fatal(err)
	}
	if n := x.len(); n > x.cap {
		t.Fatalf("after the first scan the index holds %d, cap %d", n, x.cap)
	}
	if n := x.reads.Load(); n != 0 {
		t.Fatalf("the scan read %d job.json files, want none", n)
	}
	late := func(prio int) func() {
		return func() {
			for _, j := range submitMany(t, s, requests(6, func(int) int { return prio })) {
				x.add(j.ID) // the Created event
			}
		}
	}
	got := drain(t, s, x, true, map[int]func(){10: late(9), 30: late(-3)})
	if len(got) != len(jobs)+2+12 {
		t.Fatalf("claimed %d jobs, want %d", len(got), len(jobs)+2+12)
	}
}

// Hints are only hints: with the hints' directory gone, replaced by a
// FIFO, or holding stale, hostile and huge entries, every job is still
// found and nothing blocks; a hint whose job is queued with a lower
// priority costs a read, not the order.
func TestIndexHintsMissingStaleOrHostile(t *testing.T) {
	t.Parallel()
	for _, tc := range []string{"missing", "fifo", "stale"} {
		t.Run(tc, func(t *testing.T) {
			t.Parallel()
			s, err := job.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			jobs := submitMany(t, s, requests(20, func(i int) int { return i % 3 }))
			hints := s.HintDir()
			switch tc {
			case "missing":
				if err := os.RemoveAll(hints); err != nil {
					t.Fatal(err)
				}
			case "fifo":
				if err := os.RemoveAll(hints); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(hints, 0o644); err != nil {
					t.Fatal(err)
				}
			case "stale":
				// A hint of a job that is not queued, one that claims a
				// priority its job does not have, a huge one, a FIFO, a
				// symlink and names that are no hints.
				for _, name := range []string{job.HintName(50, "gone"), job.HintName(40, jobs[0].ID), "x.y", "7", "0." + jobs[1].ID, "-2"} {
					if err := os.WriteFile(filepath.Join(hints, name), nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				big := filepath.Join(hints, job.HintName(30, jobs[3].ID))
				if err := os.WriteFile(big, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(big, 1<<30); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(filepath.Join(hints, job.HintName(20, jobs[4].ID)), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("/etc/passwd", filepath.Join(hints, job.HintName(10, jobs[5].ID))); err != nil {
					t.Fatal(err)
				}
				old := time.Now().Add(-2 * job.TempGrace)
				if err := os.Chtimes(filepath.Join(hints, job.HintName(50, "gone")), old, old); err != nil {
					t.Fatal(err)
				}
			}
			x := newIndex(s)
			x.cap = 3
			// Without hints, jobs above the default priority are
			// ordered as default ones until read: only the stale hints
			// keep the order exact.
			got := drain(t, s, x, tc == "stale", nil)
			if len(got) != len(jobs) {
				t.Fatalf("claimed %d jobs, want %d", len(got), len(jobs))
			}
			if tc == "stale" {
				// The hint of a job that exists nowhere is dropped.
				if _, err := os.Lstat(filepath.Join(hints, job.HintName(50, "gone"))); !os.IsNotExist(err) {
					t.Errorf("stale hint of a job gone: %v, want it removed", err)
				}
			}
		})
	}
}

// Before the first listing of incoming/ is done, only jobs of a positive
// priority are handed out: a job not listed yet may be better than any
// other. Once it is done, the rest follow in order.
func TestIndexBeforeFirstListing(t *testing.T) {
	t.Parallel()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	old := submitMany(t, s, requests(1, func(int) int { return 0 }))[0]
	later := submitMany(t, s, []job.SubmitRequest{
		{Kind: "noop", Prompt: []byte(`{}`)},
		{Kind: "noop", Priority: 3, Prompt: []byte(`{}`)},
	})
	x := newIndex(s)
	for _, j := range later { // their events came before any listing
		x.add(j.ID)
	}
	c, ok := x.tryNext(nil, nil)
	if !ok || c.id != later[1].ID {
		t.Fatalf("before the listing: %v %s, want the priority-3 job %s", ok, c.id, later[1].ID)
	}
	x.forget(c.id, false)
	if err := os.Rename(s.JobDir(job.Queued, "", c.id), s.Path(job.TmpDir, c.id)); err != nil {
		t.Fatal(err)
	}
	if c, ok := x.tryNext(nil, nil); ok {
		t.Fatalf("before the listing the index gave %s (priority %d)", c.id, c.priority)
	}
	if err := x.rescan(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{old.ID, later[0].ID} {
		c, ok := x.tryNext(nil, nil)
		if !ok || c.id != want {
			t.Fatalf("after the listing: %v %s, want %s", ok, c.id, want)
		}
		x.forget(c.id, false)
		if err := os.Rename(s.JobDir(job.Queued, "", c.id), s.Path(job.TmpDir, c.id)); err != nil {
			t.Fatal(err)
		}
	}
}

// Parked jobs are bounded too: beyond the cap they are dropped, and found
// again once their kind can run.
func TestIndexParkedBounded(t *testing.T) {
	t.Parallel()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Kind "later" is not runnable yet.
	later := requests(12, func(int) int { return 1 })
	for i := range later {
		later[i].Kind = "later"
	}
	var blocked []string
	for _, j := range submitMany(t, s, later) {
		blocked = append(blocked, j.ID)
	}
	ready := submitMany(t, s, requests(5, func(int) int { return 0 }))
	var mu sync.Mutex
	canRun := map[string]bool{"noop": true}
	x := newIndex(s)
	x.cap = 3
	runnable := func(kind string) bool { mu.Lock(); defer mu.Unlock(); return canRun[kind] }
	if err := x.rescan(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for deadline := time.Now().Add(20 * time.Second); len(got) < len(ready); {
		if time.Now().After(deadline) {
			t.Fatalf("the runnable jobs never came past the parked ones: got %v", got)
		}
		c, ok := x.tryNext(runnable, nil)
		if !ok {
			if _, err := x.refill(false); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got = append(got, c.id)
		if err := os.Rename(s.JobDir(job.Queued, "", c.id), s.Path(job.TmpDir, c.id)); err != nil {
			t.Fatal(err)
		}
		x.forget(c.id, false)
	}
	if n := x.parkedLen(); n == 0 || n > x.cap {
		t.Fatalf("%d jobs parked, want 1..%d", n, x.cap)
	}
	mu.Lock()
	canRun["later"] = true
	mu.Unlock()
	x.unpark("later")
	rest := drain(t, s, x, true, nil)
	sort.Strings(rest)
	sort.Strings(blocked)
	if strings.Join(rest, " ") != strings.Join(blocked, " ") {
		t.Fatalf("after unpark the index gave %v, want every blocked job %v", rest, blocked)
	}
}

// BenchmarkIndexMemoryPerJob reports the index's heap per queued job for
// 100k jobs: held (cap above the queue: the cost of one candidate) and
// capped (the default cap: what an agent pays per queued job).
func BenchmarkIndexMemoryPerJob(b *testing.B) {
	const jobs = 100_000
	ids := make([]string, jobs)
	base := time.Now()
	for i := range ids {
		ids[i] = base.Add(time.Duration(i)*time.Microsecond).UTC().Format("20060102T150405.000000Z") + fmt.Sprintf("-%06x", i)
	}
	for _, bc := range []struct {
		name string
		cap  int
	}{{"held", jobs}, {"capped", DefaultIndexCap}} {
		b.Run(bc.name, func(b *testing.B) {
			var perJob float64
			for i := 0; i < b.N; i++ {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				x := newIndex(nil)
				x.cap = bc.cap
				batch := make([]cand, 0, 256)
				for k, id := range ids {
					c := estimate(id, k%3, false)
					c.kind, c.read = x.intern("noop"), true
					x.known[id] = struct{}{}
					if batch = append(batch, c); len(batch) == cap(batch) {
						x.push(batch)
						batch = batch[:0]
					}
				}
				x.push(batch)
				runtime.GC()
				runtime.ReadMemStats(&after)
				perJob = float64(after.HeapAlloc-before.HeapAlloc) / jobs
				runtime.KeepAlive(x)
			}
			b.ReportMetric(perJob, "bytes/job")
		})
	}
}

// A job read whose priority is not the default but has no hint (a spool
// older than hints, a hint lost) gets its hint back, so that the next
// refill estimates it right.
func TestIndexRepairsMissingHints(t *testing.T) {
	t.Parallel()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	jobs := submitMany(t, s, requests(4, func(i int) int { return []int{0, 4, -2, 7}[i] }))
	if err := os.RemoveAll(s.HintDir()); err != nil {
		t.Fatal(err)
	}
	x := newIndex(s)
	x.add(jobs[3].ID) // read at once: by its event
	drain(t, s, x, false, nil)
	var got []string
	if err := s.ScanHints(func(prio int, id string) { got = append(got, job.HintName(prio, id)) }); err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	want := []string{job.HintName(-2, jobs[2].ID), job.HintName(4, jobs[1].ID), job.HintName(7, jobs[3].ID)}
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("hints after the index read the jobs: %v, want %v", got, want)
	}
}

// A refill of the hints alone (the periodic rescan of an index that holds
// less than the queue) takes a job with a hint that no event announced,
// lists nothing else, and keeps what the index knows it dropped; the
// next full listing finds the rest.
func TestIndexHintsOnlyRefill(t *testing.T) {
	t.Parallel()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	submitMany(t, s, requests(6, func(int) int { return 0 }))
	x := newIndex(s)
	x.cap = 2
	if err := x.rescan(); err != nil {
		t.Fatal(err)
	}
	if !x.partial() {
		t.Fatal("6 jobs, cap 2: the index does not know it holds less than the queue")
	}
	// Unannounced: a job of priority 2, and one whose ID says it is older
	// than all the others.
	unseen := submitMany(t, s, []job.SubmitRequest{
		{Kind: "noop", Priority: 2, Prompt: []byte(`{}`)},
		{ID: "20200101T000000.000000Z-aaaaaa", Kind: "noop", Prompt: []byte(`{}`)},
	})
	if _, err := x.refill(true); err != nil {
		t.Fatal(err)
	}
	if c, ok := x.tryNext(nil, nil); !ok || c.id != unseen[0].ID {
		t.Fatalf("after a refill of the hints: %v %s, want the hinted job %s", ok, c.id, unseen[0].ID)
	}
	x.mu.Lock()
	_, held := x.known[unseen[1].ID]
	x.mu.Unlock()
	if held || !x.partial() {
		t.Fatalf("a refill of the hints listed incoming/ (old job held: %v) or forgot it dropped jobs (partial: %v)", held, x.partial())
	}
	if _, err := x.refill(false); err != nil {
		t.Fatal(err)
	}
	x.mu.Lock()
	_, held = x.known[unseen[1].ID]
	x.mu.Unlock()
	if !held {
		t.Fatal("a full listing did not take the oldest job")
	}
}
