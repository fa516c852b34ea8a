package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
)

// TestMain checks for leaked goroutines, then stops the private
// PostgreSQL of the store tests (store_test.go), if they started it (the
// goroutine that waits for it is its own, not a leak).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/farro-dev/farro/internal/testpg.startPostgres.func1"),
		goleak.Cleanup(func(code int) { testpg.Stop(); os.Exit(code) }))
}

// testLog is an agent's logger at debug level into a buffer whose every
// line is checked strictly (logxtest) when t ends: every line every test
// makes the agent write must be one JSON object with no key twice.
func testLog(t testing.TB, id string) zerolog.Logger {
	return logx.New(logxtest.New(t), "agentd/"+id, "debug")
}

type fixture struct {
	spool  *job.Spool
	cancel context.CancelFunc
	done   chan error
	agent  *Agent
}

// setup starts an agent on a fresh spool with the given handlers.
func setup(t *testing.T, cfg Config) *fixture { t.Helper(); return setupLog(t, cfg, nil) }

// setupLog is setup with the agent's log lines written to w (nil: none).
func setupLog(t *testing.T, cfg Config, w io.Writer) *fixture {
	t.Helper()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Spool = s
	if cfg.ID == "" {
		cfg.ID = "t1"
	}
	cfg.Log = testLog(t, cfg.ID)
	if w != nil {
		cfg.Log = logx.New(io.MultiWriter(logxtest.New(t), w), "agentd/"+cfg.ID, "debug")
	}
	if cfg.Rescan == 0 {
		cfg.Rescan = 50 * time.Millisecond
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{spool: s, cancel: cancel, done: make(chan error, 1), agent: a}
	go func() { f.done <- a.Run(ctx) }()
	t.Cleanup(func() { f.stop(t) })
	<-a.Ready()
	return f
}

func (f *fixture) stop(t *testing.T) {
	t.Helper()
	if f.cancel == nil {
		return
	}
	f.cancel()
	f.cancel = nil
	if err := <-f.done; err != nil {
		t.Errorf("agent Run: %v", err)
	}
}

func (f *fixture) submit(t *testing.T, id, kind string, prio int) {
	t.Helper()
	if _, err := f.spool.Submit(job.SubmitRequest{ID: id, Kind: kind, Priority: prio, Prompt: []byte(`{"x":1}`)}); err != nil {
		t.Fatal(err)
	}
}

// waitState polls until job id is in state st.
func (f *fixture) waitState(t *testing.T, id string, st job.State) *job.Job {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if locs, err := f.spool.Locate(id); err == nil && len(locs) == 1 && locs[0].State == st {
			if j, err := job.ReadJob(locs[0].Dir); err == nil && j.Status == st {
				if _, err := os.Lstat(f.spool.LockPath(id)); os.IsNotExist(err) || st == job.InProgress {
					return j
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	locs, err := f.spool.Locate(id)
	t.Fatalf("job %s never reached %s (now %v, %v)", id, st, locs, err)
	return nil
}

func TestNoopJobsSucceed(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{Handlers: map[string]Handler{"noop": Noop}, Concurrency: 2})
	for i := 0; i < 20; i++ {
		f.submit(t, fmt.Sprintf("n%02d", i), "noop", 0)
	}
	for i := 0; i < 20; i++ {
		j := f.waitState(t, fmt.Sprintf("n%02d", i), job.Succeeded)
		if j.Attempts != 1 || j.Agent != "t1" || j.CorrelationID == "" || j.FinishedAt == nil {
			t.Errorf("job %s: attempts %d agent %q corr %q finished %v", j.ID, j.Attempts, j.Agent, j.CorrelationID, j.FinishedAt)
		}
	}
}

func TestPriorityOrder(t *testing.T) {
	t.Parallel()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Submitted before the agent starts: the initial scan sees them all.
	for i, p := range []int{0, 5, 1, 5, 9} {
		if _, err := s.Submit(job.SubmitRequest{ID: fmt.Sprintf("p%d", i), Kind: "rec", Priority: p, Prompt: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // distinct created_at
	}
	var mu sync.Mutex
	var order []string
	rec := HandlerFunc(func(_ context.Context, tk Task) Result {
		mu.Lock()
		order = append(order, tk.Env.Lifecycle.ID)
		mu.Unlock()
		return Result{}
	})
	a, err := New(Config{Spool: s, ID: "t1", Handlers: map[string]Handler{"rec": rec}, Log: testLog(t, "t1")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n == 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "p4 p1 p3 p2 p0"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("claim order %q, want %q (priority desc, then oldest)", got, want)
	}
}

func TestExecCapturesOutputAndEnv(t *testing.T) {
	t.Parallel()
	script := `read p; echo "id=$FARRO_JOB_ID attempt=$FARRO_ATTEMPT corr=$FARRO_CORRELATION_ID prompt=$p"; echo oops >&2; exit ${EXIT:-0}`
	f := setup(t, Config{Handlers: map[string]Handler{"exec": &Exec{Command: []string{"/bin/sh", "-c", script}}}})
	f.submit(t, "e1", "exec", 0)
	j := f.waitState(t, "e1", job.Succeeded)
	out, err := os.ReadFile(filepath.Join(f.spool.JobDir(job.Succeeded, "", "e1"), job.OutputFile(job.Stdout, 1)))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("id=e1 attempt=1 corr=%s prompt={\"x\":1}\n", j.CorrelationID)
	if string(out) != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if j.ExitCode == nil || *j.ExitCode != 0 {
		t.Errorf("exit code %v, want 0", j.ExitCode)
	}
}

func TestExecFailureRecordsStderrTail(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{Handlers: map[string]Handler{"exec": &Exec{Command: []string{"/bin/sh", "-c", "echo first >&2; echo 'the real reason' >&2; exit 3"}}}})
	f.submit(t, "f1", "exec", 0)
	j := f.waitState(t, "f1", job.Failed)
	if j.ExitCode == nil || *j.ExitCode != 3 {
		t.Errorf("exit code %v, want 3", j.ExitCode)
	}
	if !strings.Contains(j.Error, "the real reason") || !strings.Contains(j.Reason, "exit status 3") {
		t.Errorf("reason %q / error %q lack the exit status and stderr tail", j.Reason, j.Error)
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "child-survived")
	// The handler starts a grandchild that would write the marker later.
	script := fmt.Sprintf(`(sleep 1; touch %s) & sleep 30`, marker)
	f := setup(t, Config{Timeout: 200 * time.Millisecond, Handlers: map[string]Handler{"exec": &Exec{Command: []string{"/bin/sh", "-c", script}, KillGrace: 100 * time.Millisecond}}})
	f.submit(t, "t1", "exec", 0)
	j := f.waitState(t, "t1", job.Failed)
	if !strings.Contains(j.Error, "timed out") {
		t.Errorf("error %q does not say it timed out", j.Error)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Error("a process of the handler's group survived the timeout")
	}
}

// blocker is a handler that runs until released or stopped.
func blocker(started chan<- string) Handler {
	return HandlerFunc(func(ctx context.Context, tk Task) Result {
		started <- tk.Env.Lifecycle.ID
		<-ctx.Done()
		return Result{Err: context.Cause(ctx)}
	})
}

func TestControlHoldAndCancel(t *testing.T) {
	t.Parallel()
	started := make(chan string, 2)
	f := setup(t, Config{Concurrency: 2, ControlPoll: 20 * time.Millisecond, Handlers: map[string]Handler{"block": blocker(started)}})
	f.submit(t, "h1", "block", 0)
	f.submit(t, "c1", "block", 0)
	<-started
	<-started
	if err := f.spool.RequestControl("t1", "h1", job.Control{Action: job.ControlHold, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := f.spool.RequestControl("t1", "c1", job.Control{Action: job.ControlCancel, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	h := f.waitState(t, "h1", job.Held)
	c := f.waitState(t, "c1", job.Killed)
	if c.Reason != "cancelled" {
		t.Errorf("cancel reason %q", c.Reason)
	}
	if _, err := os.Stat(filepath.Join(f.spool.JobDir(job.Held, "", "h1"), job.ControlFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control.json left in the held job: %v (would re-trigger on release)", err)
	}
	if h.Reason != "held by operator" {
		t.Errorf("hold reason %q", h.Reason)
	}
}

func TestDrainReleasesUnfinishedJobs(t *testing.T) {
	t.Parallel()
	started := make(chan string, 1)
	f := setup(t, Config{DrainTimeout: 100 * time.Millisecond, Handlers: map[string]Handler{"block": blocker(started)}})
	f.submit(t, "d1", "block", 0)
	<-started
	f.stop(t)
	j := f.waitState(t, "d1", job.Queued)
	if j.Attempts != 0 {
		t.Errorf("released job has attempts %d, want 0 (a release is not an attempt)", j.Attempts)
	}
}

func TestTakenAwayJobIsNotCommitted(t *testing.T) {
	t.Parallel()
	started := make(chan string, 1)
	f := setup(t, Config{Heartbeat: 20 * time.Millisecond, Handlers: map[string]Handler{"block": blocker(started)}})
	f.submit(t, "s1", "block", 0)
	<-started
	// Recovery declares the holder silent and takes the job.
	if _, err := f.spool.RecoverLock("s1", "watchdogd", "test: silent"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.agent.Busy() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if f.agent.Busy() != 0 {
		t.Fatal("agent kept running a job that was taken away")
	}
	j := f.waitState(t, "s1", job.Stale)
	if j.Status != job.Stale {
		t.Errorf("status %s", j.Status)
	}
}

func TestSchemaMismatchLeftInPlace(t *testing.T) {
	t.Parallel()
	f := setup(t, Config{Handlers: map[string]Handler{"noop": Noop}})
	// Build a job with a future schema version in tmp/ and rename it into
	// incoming/ complete, as submit does.
	build := f.spool.Path(job.TmpDir, "future")
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
	dir := f.spool.JobDir(job.Queued, "", "future")
	if err := os.Rename(build, dir); err != nil {
		t.Fatal(err)
	}
	f.submit(t, "after", "noop", 0)
	f.waitState(t, "after", job.Succeeded)
	if _, err := os.Stat(filepath.Join(dir, job.JobFile)); err != nil {
		t.Errorf("future-schema job moved: %v", err)
	}
	if _, err := os.Lstat(f.spool.LockPath("future")); !os.IsNotExist(err) {
		t.Errorf("lock of the refused job not released: %v", err)
	}
}
