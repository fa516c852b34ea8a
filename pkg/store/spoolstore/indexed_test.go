package spoolstore

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

var holder = job.Holder{Actor: "test/w1", Agent: "w1"}

// indexedStore is an indexed store over a fresh spool, closed when t ends.
func indexedStore(t *testing.T, c IndexConfig) (*Store, *job.Spool) {
	t.Helper()
	sp, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if c.Rescan == 0 {
		c.Rescan = 50 * time.Millisecond
	}
	st := New(sp, WithIndex(c))
	t.Cleanup(func() { _ = st.Close() })
	return st, sp
}

func claimIDs(cs []store.Claim) []string {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.Job().ID)
	}
	return ids
}

// An indexed store that starts on a long queue claims the one
// high-priority job first, and before reading every job.json.
func TestIndexedClaimPriorityFirstWithoutReadingAll(t *testing.T) {
	t.Parallel()
	st, sp := indexedStore(t, IndexConfig{Log: zerolog.Nop()})
	const n = 500
	submitMany(t, sp, requests(n, func(int) int { return 0 }))
	high := submitMany(t, sp, requests(1, func(int) int { return 5 }))[0]
	cs, err := st.Claim(t.Context(), holder, store.ClaimOptions{Max: 1})
	if err != nil || len(cs) != 1 || cs[0].Job().ID != high.ID {
		t.Fatalf("first claim: %v, %v; want the priority-5 job %s", claimIDs(cs), err, high.ID)
	}
	if reads := st.ix.x.reads.Load(); reads >= n/10 {
		t.Errorf("the index read %d job.json files before its first claim (queue of %d)", reads, n+1)
	}
}

// A claim of several jobs takes them best first, concurrently: they share
// group-commit barriers, so the batch costs fewer syncs than claims.
func TestIndexedClaimAheadSharesBarriers(t *testing.T) {
	t.Parallel()
	st, sp := indexedStore(t, IndexConfig{Log: zerolog.Nop()})
	jobs := submitMany(t, sp, requests(8, func(i int) int { return i % 3 }))
	want := make([]string, 0, len(jobs))
	for _, p := range []int{2, 1, 0} {
		for _, j := range jobs {
			if j.Priority == p {
				want = append(want, j.ID)
			}
		}
	}
	<-st.Listed()
	before := sp.Syncs()
	cs, err := st.Claim(t.Context(), holder, store.ClaimOptions{Max: 8})
	syncs := sp.Syncs() - before
	if err != nil || strings.Join(claimIDs(cs), " ") != strings.Join(want, " ") {
		t.Fatalf("claim of 8: %v, %v; want %v", claimIDs(cs), err, want)
	}
	if syncs >= uint64(len(cs)) {
		t.Errorf("claiming %d jobs at once cost %d syncs, want fewer than one per claim", len(cs), syncs)
	}
	for _, c := range cs {
		if err := c.Commit(t.Context(), job.Succeeded, "", nil); err != nil {
			t.Fatal(err)
		}
	}
}

// Jobs of a kind no claim asks for are parked and told of (PassedOver),
// never claimed; they are claimed once a claim asks for their kind.
func TestIndexedParksKindsNotAskedFor(t *testing.T) {
	t.Parallel()
	st, sp := indexedStore(t, IndexConfig{Log: zerolog.Nop()})
	reqs := requests(6, func(int) int { return 0 })
	for i := range reqs {
		reqs[i].Kind = []string{"kind.a", "kind.b"}[i%2]
	}
	submitMany(t, sp, reqs)
	var mu sync.Mutex
	passed := map[string]string{}
	opts := store.ClaimOptions{Max: 8, Kinds: []string{"kind.a"}, PassedOver: func(kind, id string) {
		mu.Lock()
		defer mu.Unlock()
		passed[id] = kind
	}}
	cs, err := st.Claim(t.Context(), holder, opts)
	if err != nil || len(cs) != 3 {
		t.Fatalf("claim of kind.a: %v, %v; want 3 jobs", claimIDs(cs), err)
	}
	for _, c := range cs {
		if k := c.Job().Kind; k != "kind.a" {
			t.Errorf("claim of kind.a took a job of kind %s", k)
		}
	}
	mu.Lock()
	for id, kind := range passed {
		if kind != "kind.b" {
			t.Errorf("passed over %s of kind %s", id, kind)
		}
	}
	mu.Unlock()
	if n := st.Parked(); n != 3 {
		t.Errorf("%d jobs parked, want the 3 of kind.b", n)
	}
	if again, err := st.Claim(t.Context(), holder, opts); err != nil || len(again) != 0 {
		t.Fatalf("claim of kind.a again: %v, %v; want none", claimIDs(again), err)
	}
	rest, err := st.Claim(t.Context(), holder, store.ClaimOptions{Max: 8, Kinds: []string{"kind.a", "kind.b"}})
	if err != nil || len(rest) != 3 {
		t.Fatalf("claim of both kinds: %v, %v; want the 3 parked jobs", claimIDs(rest), err)
	}
	if n := st.Parked(); n != 0 {
		t.Errorf("%d jobs still parked", n)
	}
}

// A claim that does not take its job is logged with its job_id and counted
// by reason; a claim that does is counted with how long its job waited.
func TestIndexedClaimFailuresCounted(t *testing.T) {
	t.Parallel()
	var log lockedBuffer // the index's goroutine logs its refills meanwhile
	var mu sync.Mutex
	var reasons []string
	var waits []time.Duration
	st, sp := indexedStore(t, IndexConfig{
		Log:           zerolog.New(&log),
		OnClaimFailed: func(r string) { mu.Lock(); defer mu.Unlock(); reasons = append(reasons, r) },
		OnClaimed:     func(_, waited time.Duration) { mu.Lock(); defer mu.Unlock(); waits = append(waits, waited) },
	})
	// A job of a future schema, renamed into incoming/ complete.
	build := sp.Path(job.TmpDir, "future")
	if err := os.Mkdir(build, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		job.PromptFile: `{}`,
		job.JobFile:    `{"schema_version":"2.0.0","id":"future","kind":"noop","status":"queued"}`,
	} {
		if err := os.WriteFile(filepath.Join(build, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(build, sp.JobDir(job.Queued, "", "future")); err != nil {
		t.Fatal(err)
	}
	good := submitMany(t, sp, requests(1, func(int) int { return 0 }))[0]
	cs, err := st.Claim(t.Context(), holder, store.ClaimOptions{Max: 4})
	if err != nil || len(cs) != 1 || cs[0].Job().ID != good.ID {
		t.Fatalf("claim: %v, %v; want only %s", claimIDs(cs), err, good.ID)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(reasons, []string{"schema"}) {
		t.Errorf("failed claims counted %v, want [schema]", reasons)
	}
	if len(waits) != 1 || waits[0] <= 0 {
		t.Errorf("claims counted with waits %v, want one positive", waits)
	}
	if !strings.Contains(log.String(), `"job_id":"future"`) || !strings.Contains(log.String(), "unknown schema version") {
		t.Errorf("log %q: want the refused job's line", log.String())
	}
	if _, err := os.Stat(filepath.Join(sp.JobDir(job.Queued, "", "future"), job.JobFile)); err != nil {
		t.Errorf("future-schema job moved: %v", err)
	}
}

// lockedBuffer is a log sink that goroutines may write while it is read.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// WaitQueued wakes when a job arrives; a closed store claims nothing.
func TestIndexedWaitQueuedAndClose(t *testing.T) {
	t.Parallel()
	st, sp := indexedStore(t, IndexConfig{Log: zerolog.Nop()})
	<-st.Listed()
	go func() {
		if _, err := sp.Submit(job.SubmitRequest{ID: "late", Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	var cs []store.Claim
	for len(cs) == 0 && time.Now().Before(deadline) {
		woken, err := st.WaitQueued(t.Context(), 10*time.Second)
		if err != nil || !woken {
			t.Fatalf("WaitQueued: %v, %v; want woken by the job", woken, err)
		}
		if cs, err = st.Claim(t.Context(), holder, store.ClaimOptions{Max: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if len(cs) != 1 || cs[0].Job().ID != "late" {
		t.Fatalf("claim after the wake: %v", claimIDs(cs))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	submitMany(t, sp, requests(1, func(int) int { return 0 }))
	if cs, err := st.Claim(t.Context(), holder, store.ClaimOptions{Max: 1}); err == nil || len(cs) != 0 {
		t.Errorf("claim after Close: %v, %v; want an error", claimIDs(cs), err)
	}
	if _, err := st.WaitQueued(context.Background(), time.Hour); err == nil {
		t.Error("WaitQueued after Close: no error")
	}
}

// A job that left incoming/ behind the index's back (its removal event
// not read yet) and that the index had read (by its arrival event) does
// not hide a queued job from a claim: the claim's listing of a small
// incoming/ drops it, and the queued job is claimed.
func TestIndexedClaimPassesJobsGoneBehindItsBack(t *testing.T) {
	t.Parallel()
	st, sp := indexedStore(t, IndexConfig{Log: zerolog.Nop(), NoNotify: true, Rescan: time.Hour})
	queued := submitMany(t, sp, requests(1, func(int) int { return 1 }))[0]
	<-st.Listed()
	gone := submitMany(t, sp, requests(1, func(int) int { return 5 }))[0]
	st.ix.x.add(gone.ID) // its arrival event: read, the best candidate
	if err := os.Rename(sp.JobDir(job.Queued, "", gone.ID), filepath.Join(t.TempDir(), gone.ID)); err != nil {
		t.Fatal(err)
	}
	cs, err := st.Claim(t.Context(), holder, store.ClaimOptions{Max: 1})
	if err != nil || len(cs) != 1 || cs[0].Job().ID != queued.ID {
		t.Fatalf("claim: %v, %v; want the queued %s", claimIDs(cs), err, queued.ID)
	}
}

// A job listed by a refill whose listing of the hints came before the
// job's hint was written (a submit in between) is estimated at the
// default priority; the claim's own listing of the hints corrects it, so
// that the job is claimed before a worse one.
func TestIndexedClaimSeesHintMissedByARefill(t *testing.T) {
	t.Parallel()
	st, sp := indexedStore(t, IndexConfig{Log: zerolog.Nop(), NoNotify: true, Rescan: time.Hour})
	worse := submitMany(t, sp, requests(1, func(int) int { return 1 }))[0]
	<-st.Listed()
	best := submitMany(t, sp, requests(1, func(int) int { return 5 }))[0]
	// A refill that listed the hints before best's was written.
	hint := filepath.Join(sp.HintDir(), job.HintName(5, best.ID))
	aside := filepath.Join(t.TempDir(), "hint")
	if err := os.Rename(hint, aside); err != nil {
		t.Fatal(err)
	}
	if err := st.ix.x.rescan(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(aside, hint); err != nil {
		t.Fatal(err)
	}
	cs, err := st.Claim(t.Context(), holder, store.ClaimOptions{Max: 1})
	if err != nil || len(cs) != 1 || cs[0].Job().ID != best.ID {
		t.Fatalf("claim: %v, %v; want the priority-5 %s before %s", claimIDs(cs), err, best.ID, worse.ID)
	}
}
