package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// TestMain checks for leaked goroutines, then stops the private
// PostgreSQL of the shared-store tests (shared_test.go), if they started
// it (the goroutine that waits for it is its own, not a leak).
func TestMain(m *testing.M) {
	if spec := os.Getenv(stalledSubmitEnv); spec != "" {
		runStalledSubmit(spec) // a child of the sweep tests (sweep_test.go); exits
	}
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/farro-dev/farro/internal/testpg.startPostgres.func1"),
		goleak.Cleanup(func(code int) { testpg.Stop(); os.Exit(code) }))
}

type syncBuffer = logxtest.Buffer

type env struct {
	s   *job.Spool
	m   *Manager
	log *syncBuffer
}

// setup opens a fresh spool on the real filesystem and a manager over it.
func setup(t *testing.T, cfg Config) *env {
	t.Helper()
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	lb := logxtest.New(t) // every line is checked strictly when t ends
	return &env{s: s, m: New(spoolstore.New(s), cfg, logx.New(lb, Actor, "debug")), log: lb}
}

var holder = job.Holder{Actor: "agentd/t1", Agent: "t1"}

func (e *env) submit(t *testing.T, id string, maxAttempts int) {
	t.Helper()
	if _, err := e.s.Submit(job.SubmitRequest{ID: id, Kind: "noop", MaxAttempts: maxAttempts, Prompt: []byte(`{}`)}); err != nil {
		t.Fatalf("Submit %s: %v", id, err)
	}
}

// failed makes a job that ran attempts times and failed with errText.
func (e *env) failed(t *testing.T, id string, attempts, maxAttempts int, errText string) {
	t.Helper()
	e.submit(t, id, maxAttempts)
	c, err := e.s.Claim(id, holder)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if err := c.Commit(job.Failed, "handler failed", func(j *job.Job) { j.Error = errText }); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if attempts != 1 { // the claim made it 1
		e.patch(t, job.Failed, id, func(j *job.Job) { j.Attempts = attempts })
	}
}

// stale makes a job whose agent died during attempt number attempts.
func (e *env) stale(t *testing.T, id string, attempts, maxAttempts int) {
	t.Helper()
	e.submit(t, id, maxAttempts)
	if _, err := e.s.Claim(id, holder); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	out, err := e.s.RecoverLock(id, "test", "owner died: pid gone (agentd/t1 pid 1)")
	if err != nil || out.To != job.Stale {
		t.Fatalf("RecoverLock: %+v, %v", out, err)
	}
	if attempts != 1 {
		e.patch(t, job.Stale, id, func(j *job.Job) { j.Attempts = attempts })
	}
}

// patch rewrites a job.json in place, as an earlier transaction would
// have left it.
func (e *env) patch(t *testing.T, st job.State, id string, mutate func(*job.Job)) {
	t.Helper()
	dir := e.s.JobDir(st, "", id)
	j, err := job.ReadJob(dir)
	if err != nil {
		t.Fatalf("ReadJob: %v", err)
	}
	mutate(j)
	if err := fsq.WriteFile(filepath.Join(dir, job.JobFile), j.Marshal()); err != nil {
		t.Fatal(err)
	}
}

// where returns the single place of job id and its job.json.
func (e *env) where(t *testing.T, id string) (job.State, *job.Job) {
	t.Helper()
	locs, err := e.s.Locate(id)
	if err != nil {
		t.Fatalf("Locate %s: %v", id, err)
	}
	if len(locs) != 1 {
		t.Fatalf("job %s in %d places: %+v", id, len(locs), locs)
	}
	j, err := job.ReadJob(locs[0].Dir)
	if err != nil {
		t.Fatalf("ReadJob: %v", err)
	}
	if j.Status != locs[0].State {
		t.Fatalf("job %s: status %s in %s/", id, j.Status, locs[0].State.Dir())
	}
	return locs[0].State, j
}

func (e *env) runOnce(t *testing.T) {
	t.Helper()
	if err := e.m.RunOnce(context.Background()); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) state(id string) job.State {
	locs, err := e.s.Locate(id)
	if err != nil || len(locs) != 1 {
		return ""
	}
	return locs[0].State
}

func TestFailedWithAttemptsLeftIsDeferredThenQueued(t *testing.T) {
	t.Parallel()
	// A long cap keeps the job deferred for the first part of the test.
	const ceiling = time.Hour
	e := setup(t, Config{BackoffBase: ceiling, BackoffMax: ceiling})
	e.failed(t, "f1", 1, 0, "exit status 1: boom\nsecond line")

	before := time.Now()
	e.runOnce(t)
	after := time.Now()
	st, j := e.where(t, "f1")
	if st != job.Deferred {
		t.Fatalf("state %s, want deferred", st)
	}
	if j.NotBefore == nil || j.NotBefore.Before(before) || j.NotBefore.After(after.Add(ceiling)) {
		t.Fatalf("not_before %v outside [%v, %v]", j.NotBefore, before, after.Add(ceiling))
	}
	if !strings.HasPrefix(j.Reason, "retry 1/2 in ") || !strings.HasSuffix(j.Reason, ": exit status 1: boom second line") {
		t.Fatalf("reason %q", j.Reason)
	}
	if j.Attempts != 1 || j.Error == "" {
		t.Fatalf("attempts %d error %q", j.Attempts, j.Error)
	}
	e.runOnce(t)
	if st, _ := e.where(t, "f1"); st != job.Deferred {
		t.Fatalf("promoted before its not_before: %s", st)
	}

	// The backoff runs out (shortened here) and the job comes back.
	due := time.Now().Add(50 * time.Millisecond).UTC()
	e.patch(t, job.Deferred, "f1", func(j *job.Job) { j.NotBefore = &due })
	j.NotBefore = &due
	e.runOnce(t) // a rescan sees the new not_before

	eventually(t, 5*time.Second, "promotion to incoming/", func() bool {
		e.runOnce(t)
		return e.state("f1") == job.Queued
	})
	if time.Now().Before(*j.NotBefore) {
		t.Fatalf("promoted before not_before %v", j.NotBefore)
	}
	_, j = e.where(t, "f1")
	if j.NotBefore != nil || j.Reason != "not_before reached" {
		t.Fatalf("queued job: not_before %v reason %q", j.NotBefore, j.Reason)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	base, max := time.Second, 5*time.Minute
	for _, tc := range []struct {
		attempts int
		want     time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {9, 256 * time.Second}, {10, max}, {1000, max}} {
		if got := backoffCap(base, max, tc.attempts); got != tc.want {
			t.Errorf("cap after %d attempts = %s, want %s", tc.attempts, got, tc.want)
		}
		// Full jitter: the delay spans [0, cap], both ends included.
		if got := backoff(base, max, tc.attempts, func(int64) int64 { return 0 }); got != 0 {
			t.Errorf("lowest delay = %s, want 0", got)
		}
		if got := backoff(base, max, tc.attempts, func(n int64) int64 { return n - 1 }); got != tc.want {
			t.Errorf("highest delay after %d attempts = %s, want %s", tc.attempts, got, tc.want)
		}
	}
	if got := backoffCap(time.Duration(1<<62), time.Duration(1<<63-1), 5); got != time.Duration(1<<63-1) {
		t.Errorf("overflowing cap = %d", got)
	}
}

func TestRetryNotBeforeUsesJitterSource(t *testing.T) {
	t.Parallel()
	// The highest jitter puts not_before at now + the cap for attempt 2.
	e := setup(t, Config{BackoffBase: time.Minute, BackoffMax: time.Hour, Rand: func(n int64) int64 { return n - 1 }})
	e.failed(t, "f2", 2, 0, "boom")
	before := time.Now()
	e.runOnce(t)
	_, j := e.where(t, "f2")
	if d := j.NotBefore.Sub(before); d < 2*time.Minute || d > 2*time.Minute+5*time.Second {
		t.Fatalf("not_before is now+%s, want now+2m", d)
	}
	if !strings.HasPrefix(j.Reason, "retry 2/2 in 2m0s: boom") {
		t.Fatalf("reason %q", j.Reason)
	}
}

func TestFailedOutOfAttemptsIsKilled(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	e.failed(t, "f3", 3, 0, "boom")
	e.runOnce(t)
	st, j := e.where(t, "f3")
	if st != job.Killed || j.Reason != "failed 3 times: out of attempts" || j.Error != "boom" || j.FinishedAt == nil {
		t.Fatalf("state %s reason %q error %q finished %v", st, j.Reason, j.Error, j.FinishedAt)
	}
	assertTransitionLogged(t, e.log, "f3", job.Failed, job.Killed)
}

func TestStaleWithAttemptsLeftIsRequeuedAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	e.stale(t, "s1", 1, 0)
	e.runOnce(t)
	st, j := e.where(t, "s1")
	if st != job.Queued || j.Reason != "requeued after crash (attempt 1/3)" {
		t.Fatalf("state %s reason %q", st, j.Reason)
	}
	if j.Error != "owner died: pid gone (agentd/t1 pid 1)" || j.NotBefore != nil {
		t.Fatalf("error %q not_before %v", j.Error, j.NotBefore)
	}
	assertTransitionLogged(t, e.log, "s1", job.Stale, job.Queued)
}

func TestStaleOutOfAttemptsIsKilled(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	e.stale(t, "s2", 3, 0)
	e.runOnce(t)
	st, j := e.where(t, "s2")
	if st != job.Killed || j.Reason != "crashed and exceeded max retries (3)" {
		t.Fatalf("state %s reason %q", st, j.Reason)
	}
	if j.Error != "owner died: pid gone (agentd/t1 pid 1)" {
		t.Fatalf("error %q", j.Error)
	}
}

func TestPerJobMaxAttemptsBeatsTheFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		flag, jobMax     int
		stale            bool
		attempts         int
		wantState        job.State
		wantReasonPrefix string
	}{
		{"failed-job-lower", 5, 2, false, 2, job.Killed, "failed 2 times: out of attempts"},
		{"failed-job-higher", 2, 5, false, 3, job.Deferred, "retry 3/4 in "},
		{"stale-job-lower", 5, 1, true, 1, job.Killed, "crashed and exceeded max retries (1)"},
		{"stale-job-higher", 2, 5, true, 3, job.Queued, "requeued after crash (attempt 3/5)"},
		{"flag-when-job-has-none", 2, 0, true, 2, job.Killed, "crashed and exceeded max retries (2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, Config{MaxAttempts: tc.flag, BackoffBase: time.Hour, BackoffMax: time.Hour})
			if tc.stale {
				e.stale(t, "j", tc.attempts, tc.jobMax)
			} else {
				e.failed(t, "j", tc.attempts, tc.jobMax, "boom")
			}
			e.runOnce(t)
			st, j := e.where(t, "j")
			if st != tc.wantState || !strings.HasPrefix(j.Reason, tc.wantReasonPrefix) {
				t.Fatalf("state %s reason %q, want %s %q", st, j.Reason, tc.wantState, tc.wantReasonPrefix)
			}
		})
	}
}

func TestTmpSweepRemovesOnlyOldEntries(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{TmpMaxAge: time.Hour})
	tmp := e.s.Path(job.TmpDir)
	old := time.Now().Add(-2 * time.Hour)
	mk := func(name string, dir bool, mtime time.Time) {
		p := filepath.Join(tmp, name)
		if dir {
			if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(p, "sub", "f"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	mk("old-job.1a2b", true, old)
	mk(".old-dotfile", false, old)
	mk("young-job.3c4d", true, time.Now())
	mk("young-file", false, time.Now().Add(-30*time.Minute))
	e.runOnce(t)
	if got, want := ls(t, tmp), []string{"young-file", "young-job.3c4d"}; !equal(got, want) {
		t.Fatalf("tmp/ holds %v, want %v", got, want)
	}
}

func TestRetentionRemovesOnlyOldTerminalJobs(t *testing.T) {
	t.Parallel()
	old := time.Now().Add(-2 * time.Hour).UTC()
	build := func(t *testing.T, e *env) {
		succeed := func(id string, finished time.Time) {
			e.submit(t, id, 0)
			c, err := e.s.Claim(id, holder)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Commit(job.Succeeded, "", nil); err != nil {
				t.Fatal(err)
			}
			e.patch(t, job.Succeeded, id, func(j *job.Job) { j.FinishedAt = &finished })
			e.age(t, job.Succeeded, id, finished)
		}
		kill := func(id string, updated time.Time) {
			e.submit(t, id, 0)
			if _, err := e.s.Move(id, job.Queued, job.Killed, "test", "cancelled", nil); err != nil {
				t.Fatal(err)
			}
			e.patch(t, job.Killed, id, func(j *job.Job) { j.FinishedAt, j.UpdatedAt = nil, updated })
			e.age(t, job.Killed, id, updated)
		}
		succeed("ok-old", old)
		succeed("ok-young", time.Now().UTC())
		kill("killed-old", old)
		kill("killed-young", time.Now().UTC())
		e.submit(t, "held-old", 0)
		if _, err := e.s.Move("held-old", job.Queued, job.Held, "test", "", nil); err != nil {
			t.Fatal(err)
		}
		e.patch(t, job.Held, "held-old", func(j *job.Job) { j.UpdatedAt = old })
	}
	t.Run("on", func(t *testing.T) {
		t.Parallel()
		e := setup(t, Config{Retention: time.Hour})
		build(t, e)
		e.runOnce(t)
		for _, id := range []string{"ok-old", "killed-old"} {
			if _, err := e.s.Locate(id); err == nil {
				t.Errorf("%s survived retention", id)
			}
		}
		for _, id := range []string{"ok-young", "killed-young", "held-old"} {
			e.where(t, id)
		}
		if got := ls(t, e.s.Path(job.TmpDir)); len(got) != 0 {
			t.Errorf("tmp/ holds %v after retention", got)
		}
		if got := ls(t, e.s.StateDir(job.Queued)); len(got) != 0 {
			t.Errorf("incoming/ holds %v (a lock left behind?)", got)
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		e := setup(t, Config{})
		build(t, e)
		e.runOnce(t)
		for _, id := range []string{"ok-old", "killed-old", "ok-young", "killed-young", "held-old"} {
			e.where(t, id)
		}
	})
}

func TestRunOnceOnEmptySpoolIsANoop(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Retention: time.Hour})
	before := tree(t, e.s.Root)
	e.runOnce(t)
	e.runOnce(t)
	if after := tree(t, e.s.Root); !equal(before, after) {
		t.Fatalf("spool changed:\nbefore %v\nafter  %v", before, after)
	}
	for _, l := range e.log.Lines(t) {
		if l["level"] != "debug" {
			t.Fatalf("unexpected log line %v", l)
		}
	}
}

func TestCorruptFailedJobIsQuarantinedAndThePassGoesOn(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{BackoffBase: time.Hour, BackoffMax: time.Hour})
	e.failed(t, "a-good", 1, 0, "boom")
	bad := e.s.JobDir(job.Failed, "", "b-bad")
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, job.JobFile), []byte(`{"schema_version":"1.0.0","id":`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A symlink planted in stale/ is quarantined too, never followed.
	if err := os.Symlink(e.s.JobDir(job.Failed, "", "a-good"), e.s.JobDir(job.Stale, "", "c-link")); err != nil {
		t.Fatal(err)
	}
	e.failed(t, "d-good", 1, 0, "boom")

	e.runOnce(t)
	for _, id := range []string{"a-good", "d-good"} {
		if st, _ := e.where(t, id); st != job.Deferred {
			t.Fatalf("%s in %s, want deferred", id, st)
		}
	}
	q := ls(t, e.s.Path(job.CorruptDir))
	var names []string
	for _, n := range q {
		names = append(names, strings.SplitN(n, ".", 2)[0])
	}
	sort.Strings(names)
	if !equal(names, []string{"b-bad", "b-bad", "c-link", "c-link"}) { // each with its .quarantine.json
		t.Fatalf("corrupt/ holds %v", q)
	}
	if got := ls(t, e.s.StateDir(job.Failed)); len(got) != 0 {
		t.Fatalf("failed/ still holds %v", got)
	}
	if got := ls(t, e.s.StateDir(job.Queued)); len(got) != 0 {
		t.Fatalf("incoming/ holds %v (a lock left behind?)", got)
	}
	n := 0
	for _, l := range e.log.Lines(t) {
		if l["message"] == "corrupt job quarantined" && l["level"] == "error" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d quarantine log lines, want 2", n)
	}
}

func TestUnknownSchemaIsLeftInPlaceAndReportedOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	e.failed(t, "future", 1, 0, "boom")
	p := filepath.Join(e.s.JobDir(job.Failed, "", "future"), job.JobFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Replace(b, []byte(`"1.0.0"`), []byte(`"9.0.0"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	e.runOnce(t)
	e.runOnce(t)
	if _, err := os.Lstat(e.s.JobDir(job.Failed, "", "future")); err != nil {
		t.Fatalf("job moved: %v", err)
	}
	n := 0
	for _, l := range e.log.Lines(t) {
		if l["level"] == "error" && l["job_id"] == "future" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d error lines for the job, want 1", n)
	}
}

func TestBusyJobIsLeftAloneUntilItsLockGoes(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Rescan: time.Hour, RetryBusy: time.Hour})
	e.stale(t, "busy", 1, 0)
	lock := e.s.LockPath("busy")
	if err := fsq.TryLock(lock, []byte(`{"pid":1}`)); err != nil {
		t.Fatal(err)
	}
	e.runOnce(t)
	if st := e.state("busy"); st != job.Stale {
		t.Fatalf("state %s with its lock held", st)
	}
	stop := runInBackground(t, e)
	defer stop()
	// Neither a rescan nor the retry timer fires within the test: only the
	// lock's removal can bring the job back to the manager's attention.
	if err := fsq.Unlock(lock); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "requeue after unlock", func() bool { return e.state("busy") == job.Queued })
}

// runInBackground starts Run and waits for its first pass; stop cancels it
// and checks that Run returned nil.
func runInBackground(t *testing.T, e *env) func() {
	t.Helper()
	ready := make(chan struct{})
	e.m.cfg.Ready = func() { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.m.Run(ctx) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("Run returned before ready: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("Run not ready after 10s")
	}
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	}
}

func TestRunReactsWithinMilliseconds(t *testing.T) {
	t.Parallel()
	// Rescans never happen during the test: events alone drive the manager.
	e := setup(t, Config{Rescan: time.Hour, BackoffBase: 30 * time.Millisecond, BackoffMax: 30 * time.Millisecond})
	stop := runInBackground(t, e)
	defer stop()

	// A stale job is requeued at once.
	e.stale(t, "crashed", 1, 0)
	eventually(t, 2*time.Second, "stale job requeued", func() bool { return e.state("crashed") == job.Queued })

	// A failed job goes through deferred/ and comes back by itself.
	e.failed(t, "flaky", 1, 0, "boom")
	eventually(t, 2*time.Second, "failed job requeued", func() bool { return e.state("flaky") == job.Queued })
	var sawDeferred bool
	b, err := os.ReadFile(filepath.Join(e.s.JobDir(job.Queued, "", "flaky"), job.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev job.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		sawDeferred = sawDeferred || ev.To == job.Deferred
	}
	if !sawDeferred {
		t.Fatalf("no deferred step in the history:\n%s", b)
	}

	// A scheduled job is promoted when due, not before.
	at := time.Now().Add(150 * time.Millisecond)
	if _, err := e.s.Submit(job.SubmitRequest{ID: "scheduled", Kind: "noop", NotBefore: at, Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "scheduled job promoted", func() bool { return e.state("scheduled") == job.Queued })
	if time.Now().Before(at) {
		t.Fatal("scheduled job promoted before its not_before")
	}
}

func TestDeferredPromotedInNotBeforeOrder(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	now := time.Now()
	ids := []string{"c", "a", "b"}
	for i, id := range ids {
		if _, err := e.s.Submit(job.SubmitRequest{ID: id, Kind: "noop", NotBefore: now.Add(time.Duration(i+1) * time.Second), Prompt: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	e.patch(t, job.Deferred, "b", func(j *job.Job) { nb := now.Add(time.Hour); j.NotBefore = &nb })
	e.runOnce(t)
	if e.m.sched.len() != 3 {
		t.Fatalf("%d deferred jobs indexed, want 3", e.m.sched.len())
	}
	var got []string
	eventually(t, 5*time.Second, "c and a promoted", func() bool {
		e.m.promoteDue(context.Background())
		for _, id := range ids {
			if e.state(id) == job.Queued && !contains(got, id) {
				got = append(got, id)
			}
		}
		return len(got) == 2
	})
	if !equal(got, []string{"c", "a"}) {
		t.Fatalf("promoted %v, want [c a]", got)
	}
	if e.state("b") != job.Deferred {
		t.Fatal("b promoted before its not_before")
	}
	if at, ok := e.m.sched.next(); !ok || at.Before(now.Add(59*time.Minute)) {
		t.Fatalf("next due %v %v, want b's not_before", at, ok)
	}
}

func assertTransitionLogged(t *testing.T, lb *syncBuffer, id string, from, to job.State) {
	t.Helper()
	for _, l := range lb.Lines(t) {
		ev, _ := l["event"].(map[string]any)
		if l["job_id"] == id && ev["type"] == "state_transition" && ev["from"] == string(from) && ev["to"] == string(to) {
			if l["app"] != logx.App || l["actor"] != Actor || l["timestamp"] == nil || l["message"] == nil || l["kind"] == nil {
				t.Fatalf("transition line lacks fields: %v", l)
			}
			return
		}
	}
	t.Fatalf("no state_transition %s -> %s logged for %s", from, to, id)
}

func ls(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// tree lists every path below root.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// A rescan reads a deferred job's job.json only when the job is new to it
// or its directory changed (every job.json write renames into it): a job
// whose file is overwritten in place, leaving the directory as it was, is
// not read again (so it is not found corrupt), and is read once its
// directory changes.
func TestRescanReadsOnlyChangedDeferredJobs(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{BackoffBase: time.Hour, BackoffMax: time.Hour})
	e.failed(t, "d1", 1, 0, "boom")
	e.runOnce(t) // deferred, read once
	if st := e.state("d1"); st != job.Deferred {
		t.Fatalf("state %s, want deferred", st)
	}
	dir := e.s.JobDir(job.Deferred, "", "d1")
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, job.JobFile), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("not json"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(dir, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	e.runOnce(t)
	if st := e.state("d1"); st != job.Deferred {
		t.Fatalf("an unchanged deferred job was read again: %s", st)
	}
	later := fi.ModTime().Add(time.Second)
	if err := os.Chtimes(dir, later, later); err != nil {
		t.Fatal(err)
	}
	e.runOnce(t)
	if st := e.state("d1"); st == job.Deferred {
		t.Fatal("a deferred job whose directory changed was not read again")
	}
}
