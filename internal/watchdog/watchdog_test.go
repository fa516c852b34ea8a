package watchdog

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/internal/testpg"

	"go.uber.org/goleak"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// TestMain checks for leaked goroutines, then stops the private
// PostgreSQL of the shared-store tests (shared_test.go), if they started
// it (the goroutine that waits for it is its own, not a leak).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/farro-dev/farro/internal/testpg.startPostgres.func1"),
		goleak.Cleanup(func(code int) { testpg.Stop(); os.Exit(code) }))
}

type syncBuffer = logxtest.Buffer

type env struct {
	s     *job.Spool
	w     *Watchdog
	log   *syncBuffer
	clock *clock
}

// clock is the watchdog's clock in tests: it moves only when told to, so
// a test steps through minutes of the watchdog's time without sleeping.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// after runs a pass, lets d pass on the watchdog's clock, and runs
// another: what the first pass saw has then been unchanged for d.
func (e *env) after(t *testing.T, d time.Duration) {
	t.Helper()
	e.runOnce(t)
	e.clock.Advance(d)
	e.runOnce(t)
}

// setup opens a fresh spool on the real filesystem and a watchdog over it.
func setup(t *testing.T, cfg Config) *env {
	t.Helper()
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	lb := logxtest.New(t) // every line is checked strictly when t ends
	ck := &clock{now: time.Now()}
	if cfg.Now == nil {
		cfg.Now = ck.Now
	}
	return &env{s: s, w: New(spoolstore.New(s), cfg, logx.New(lb, Actor, "debug")), log: lb, clock: ck}
}

var holder = job.Holder{Actor: "agentd/t1", Agent: "t1"}

// claim submits and claims a job as agent t1 (this process).
func (e *env) claim(t *testing.T, id string) *job.Claimed {
	t.Helper()
	if _, err := e.s.Submit(job.SubmitRequest{ID: id, Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	c, err := e.s.Claim(id, holder)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return c
}

// setOwner replaces the owner file of job id's lock.
func (e *env) setOwner(t *testing.T, id string, o job.Owner) {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsq.WriteFile(filepath.Join(e.s.LockPath(id), fsq.OwnerFile), b); err != nil {
		t.Fatal(err)
	}
}

// patch rewrites the job.json at dir in place.
func patch(t *testing.T, dir string, mutate func(*job.Job)) {
	t.Helper()
	j, err := job.ReadJob(dir)
	if err != nil {
		t.Fatalf("ReadJob: %v", err)
	}
	mutate(j)
	if err := fsq.WriteFile(filepath.Join(dir, job.JobFile), j.Marshal()); err != nil {
		t.Fatal(err)
	}
}

// where returns the single place of job id and its job.json, whose status
// must match the place.
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
	if err := e.w.RunOnce(context.Background()); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
}

func (e *env) locked(id string) bool {
	_, err := os.Lstat(e.s.LockPath(id))
	return err == nil
}

// deadPID returns the pid of a child process that has exited and been
// reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v", err)
	}
	return cmd.ProcessState.Pid()
}

func age(t *testing.T, path string, d time.Duration) {
	t.Helper()
	at := time.Now().Add(-d)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func TestDeadOwnerIsRecoveredToStale(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	e.claim(t, "j1")
	o := job.NewOwner(holder.Actor, holder.Agent)
	o.PID = deadPID(t)
	e.setOwner(t, "j1", o)

	e.runOnce(t)
	st, j := e.where(t, "j1")
	if st != job.Stale {
		t.Fatalf("state %s, want stale", st)
	}
	// The pid could have been taken by a new process meanwhile: "pid
	// reused" is then the (equally dead) verdict.
	if !strings.HasPrefix(j.Reason, "owner died: pid ") || !strings.HasSuffix(j.Reason, " (agentd/t1 pid "+itoa(o.PID)+")") {
		t.Fatalf("reason %q", j.Reason)
	}
	if e.locked("j1") {
		t.Fatal("lock left behind")
	}
	l := findTransition(t, e.log, "j1", job.InProgress, job.Stale)
	if v, _ := l["verdict"].(string); !strings.HasPrefix(v, "pid ") {
		t.Fatalf("verdict %q", v)
	}
}

func TestLiveOwnerWithFreshHeartbeatIsNeverTouched(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	c := e.claim(t, "j2")
	owner, err := fsq.ReadOwner(e.s.LockPath("j2"))
	if err != nil {
		t.Fatal(err)
	}
	before := c.Envelope().Lifecycle
	for range 3 {
		e.runOnce(t)
	}
	st, j := e.where(t, "j2")
	if st != job.InProgress || j.Reason != "" || !j.LastHeartbeat.Equal(*before.LastHeartbeat) {
		t.Fatalf("state %s reason %q", st, j.Reason)
	}
	if now, err := fsq.ReadOwner(e.s.LockPath("j2")); err != nil || !bytes.Equal(now, owner) {
		t.Fatalf("owner file changed: %s, %v", now, err)
	}
	for _, l := range e.log.Lines(t) {
		if l["level"] != "info" && l["level"] != "debug" {
			t.Fatalf("unexpected log line %v", l)
		}
	}
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatalf("the agent cannot commit after the watchdog's passes: %v", err)
	}
}

func TestSilentOwnerGoesStale(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		patch func(j *job.Job, old time.Time)
	}{
		{"old-heartbeat", func(j *job.Job, old time.Time) { j.LastHeartbeat = &old }},
		{"no-heartbeat-old-start", func(j *job.Job, old time.Time) { j.LastHeartbeat, j.StartedAt = nil, &old }},
		// The agent's wall clock was stepped back an hour: its last
		// heartbeat is stamped in the future, and it is silent all the same.
		{"heartbeat-in-the-future", func(j *job.Job, _ time.Time) { f := time.Now().Add(time.Hour); j.LastHeartbeat = &f }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, Config{CrashThreshold: 30 * time.Second})
			e.claim(t, "j3")
			old := time.Now().Add(-31 * time.Second).UTC()
			patch(t, e.s.JobDir(job.InProgress, holder.Agent, "j3"), func(j *job.Job) { tc.patch(j, old) })
			e.after(t, 31*time.Second)
			st, j := e.where(t, "j3")
			want := "owner silent: no heartbeat for 31s (agentd/t1 pid " + itoa(os.Getpid()) + ")"
			if st != job.Stale || j.Reason != want {
				t.Fatalf("state %s reason %q, want stale %q", st, j.Reason, want)
			}
			if e.locked("j3") {
				t.Fatal("lock left behind")
			}
			if l := findTransition(t, e.log, "j3", job.InProgress, job.Stale); l["verdict"] != VerdictSilent {
				t.Fatalf("verdict %v", l["verdict"])
			}
		})
	}
}

func TestHeartbeatJustUnderTheThresholdIsNotSilent(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{CrashThreshold: 30 * time.Second})
	e.claim(t, "j4")
	hb := time.Now().Add(-25 * time.Second).UTC()
	patch(t, e.s.JobDir(job.InProgress, holder.Agent, "j4"), func(j *job.Job) { j.LastHeartbeat = &hb })
	e.after(t, 25*time.Second)
	if st, _ := e.where(t, "j4"); st != job.InProgress || !e.locked("j4") {
		t.Fatalf("state %s locked %v", st, e.locked("j4"))
	}
}

func TestLockWithoutOwnerFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		age       time.Duration
		wantState job.State
	}{
		{"older-than-grace", 6 * time.Second, job.Stale},
		{"younger-than-grace", 0, job.InProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, Config{LockGrace: 5 * time.Second})
			e.claim(t, "j5")
			lock := e.s.LockPath("j5")
			if err := os.Remove(filepath.Join(lock, fsq.OwnerFile)); err != nil {
				t.Fatal(err)
			}
			e.after(t, tc.age)
			st, j := e.where(t, "j5")
			if st != tc.wantState {
				t.Fatalf("state %s, want %s", st, tc.wantState)
			}
			if e.locked("j5") != (tc.wantState == job.InProgress) {
				t.Fatalf("locked %v", e.locked("j5"))
			}
			if st == job.Stale && !strings.HasPrefix(j.Reason, "owner died: lock has no owner file after 6") {
				t.Fatalf("reason %q", j.Reason)
			}
		})
	}
}

func TestOrphanLockOfAQueuedJobIsRemoved(t *testing.T) {
	t.Parallel()
	// A claimer died between its mkdir and its rename: the job never left
	// incoming/, and only the lock has to go.
	e := setup(t, Config{})
	if _, err := e.s.Submit(job.SubmitRequest{ID: "j6", Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	o := job.NewOwner(holder.Actor, holder.Agent)
	o.PID = deadPID(t)
	b, _ := json.Marshal(o)
	if err := fsq.TryLock(e.s.LockPath("j6"), b); err != nil {
		t.Fatal(err)
	}
	e.runOnce(t)
	if st, j := e.where(t, "j6"); st != job.Queued || j.Attempts != 0 {
		t.Fatalf("state %s attempts %d", st, j.Attempts)
	}
	if e.locked("j6") {
		t.Fatal("orphan lock left behind")
	}
	if _, err := e.s.Claim("j6", holder); err != nil {
		t.Fatalf("job cannot be claimed after recovery: %v", err)
	}
}

func TestInProgressJobWithoutLock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		age       time.Duration
		wantState job.State
	}{
		{"older-than-grace", 10 * time.Second, job.Stale},
		{"younger-than-grace", 0, job.InProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, Config{LockGrace: 5 * time.Second})
			e.claim(t, "j7")
			if err := fsq.Unlock(e.s.LockPath("j7")); err != nil {
				t.Fatal(err)
			}
			e.after(t, tc.age)
			st, j := e.where(t, "j7")
			if st != tc.wantState {
				t.Fatalf("state %s, want %s", st, tc.wantState)
			}
			if st == job.Stale && j.Reason != "owner died: in-progress job has no lock (agent t1)" {
				t.Fatalf("reason %q", j.Reason)
			}
			if e.locked("j7") {
				t.Fatal("the watchdog left its lock behind")
			}
		})
	}
}

func TestStartupReconcileRepairsStatusMismatches(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	// A deferred job whose move to incoming/ was cut after its status
	// write: rolled forward.
	if _, err := e.s.Submit(job.SubmitRequest{ID: "d1", Kind: "noop", NotBefore: time.Now().Add(time.Hour), Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	patch(t, e.s.JobDir(job.Deferred, "", "d1"), func(j *job.Job) { j.Status = job.Queued })
	// A consistent job is left alone.
	if _, err := e.s.Submit(job.SubmitRequest{ID: "q1", Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// A corrupt job is quarantined.
	held := e.s.JobDir(job.Held, "", "h1")
	if err := os.Mkdir(held, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(held, job.JobFile), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A mismatch whose lock is held is left to its holder.
	if _, err := e.s.Submit(job.SubmitRequest{ID: "b1", Kind: "noop", Held: true, Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	patch(t, e.s.JobDir(job.Held, "", "b1"), func(j *job.Job) { j.Status = job.Queued })
	b, _ := json.Marshal(job.NewOwner("farroctl", ""))
	if err := fsq.TryLock(e.s.LockPath("b1"), b); err != nil {
		t.Fatal(err)
	}

	e.runOnce(t)
	if st, _ := e.where(t, "d1"); st != job.Queued {
		t.Fatalf("d1 in %s, want rolled forward to incoming/", st)
	}
	if st, _ := e.where(t, "q1"); st != job.Queued {
		t.Fatalf("q1 in %s", st)
	}
	if _, err := e.s.Locate("h1"); err == nil {
		t.Fatal("corrupt h1 still in a state directory")
	}
	if locs, err := e.s.Locate("b1"); err != nil || locs[0].State != job.Held || !e.locked("b1") {
		t.Fatalf("b1 touched under its holder's lock: %+v %v", locs, err)
	}
	var summary map[string]any
	for _, l := range e.log.Lines(t) {
		if l["message"] == "startup reconcile done" {
			summary = l
		}
	}
	want := map[string]float64{"jobs": 4, "consistent": 1, "reconciled": 1, "quarantined": 1, "busy": 1, "failed": 0}
	for k, v := range want {
		if summary[k] != v {
			t.Fatalf("summary %s = %v, want %v (%v)", k, summary[k], v, summary)
		}
	}
	// The startup pass runs once.
	patch(t, e.s.JobDir(job.Queued, "", "q1"), func(j *job.Job) { j.Status = job.Held })
	e.runOnce(t)
	if locs, _ := e.s.Locate("q1"); locs[0].State != job.Queued {
		t.Fatal("second pass reconciled again")
	}
}

func TestHostileLockIsQuarantined(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	if _, err := e.s.Submit(job.SubmitRequest{ID: "j8", Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), e.s.LockPath("j8")); err != nil {
		t.Fatal(err)
	}
	e.runOnce(t)
	if _, err := os.Lstat(e.s.LockPath("j8")); err == nil {
		t.Fatal("planted lock still there")
	}
	if _, err := e.s.Claim("j8", holder); err != nil {
		t.Fatalf("claim after quarantine: %v", err)
	}
}

// TestRunRecoversAKilledOwnerWithinASecond runs the loop with default
// settings: a claim seen through fsnotify, its owner SIGKILLed, and the job
// must be in stale/ well within the 2s budget of the operator contract.
func TestRunRecoversAKilledOwnerWithinASecond(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Rescan: time.Hour}) // only events teach it the lock
	ready := make(chan struct{})
	e.w.cfg.Ready = func() { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}

	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Skipf("cannot start a child process: %v", err)
	}
	e.claim(t, "j9")
	self := proc.Self()
	o := job.NewOwner("agentd/child", holder.Agent)
	o.Identity = proc.Identity{Hostname: self.Hostname, PID: child.Process.Pid, BootID: self.BootID}
	e.setOwner(t, "j9", o)
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	killed := time.Now()
	deadline := killed.Add(2 * time.Second)
	for {
		if locs, err := e.s.Locate("j9"); err == nil && locs[0].State == job.Stale && !e.locked("j9") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("job not in stale/ 2s after its owner was killed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(killed); d > 1500*time.Millisecond { // ~1 interval, with room for a loaded machine
		t.Errorf("recovery took %s", d)
	}
	// The line is written just after the lock goes: wait for it.
	for !strings.Contains(e.log.String(), `"to":"stale"`) {
		if time.Now().After(deadline.Add(time.Second)) {
			t.Fatal("no transition logged")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, l := range e.log.Lines(t) {
		for _, k := range []string{"timestamp", "level", "message", "app", "actor"} {
			if _, ok := l[k]; !ok {
				t.Fatalf("log line lacks %s: %v", k, l)
			}
		}
	}
	findTransition(t, e.log, "j9", job.InProgress, job.Stale)
}

func findTransition(t *testing.T, lb *syncBuffer, id string, from, to job.State) map[string]any {
	t.Helper()
	for _, l := range lb.Lines(t) {
		ev, _ := l["event"].(map[string]any)
		if l["job_id"] == id && ev["type"] == "state_transition" && ev["from"] == string(from) && ev["to"] == string(to) {
			if l["app"] != logx.App || l["actor"] != Actor || l["timestamp"] == nil || l["correlation_id"] == nil || l["kind"] == nil {
				t.Fatalf("transition line lacks fields: %v", l)
			}
			return l
		}
	}
	t.Fatalf("no state_transition %s -> %s logged for %s", from, to, id)
	return nil
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
