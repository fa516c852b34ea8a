package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/localrun"
	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// newPGStore migrates a fresh database and opens a store on it with
// attempts under local.
func newPGStore(t *testing.T, local string) *pgstore.Store {
	t.Helper()
	ctx := context.Background()
	url := testpg.NewDatabase(t, testpg.Start(t))
	if _, err := pgstore.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	st, err := pgstore.Open(ctx, url, pgstore.WithScratch(filepath.Join(local, "scratch")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// startPG starts an agent on st, local its host's directory, with the
// exec handler script (sh -c); its log lines also go to w (nil: none).
func startPG(t *testing.T, st store.Store, local, script string, cfg Config, w io.Writer) *fixture {
	t.Helper()
	cfg.Store, cfg.Local = st, local
	if cfg.ID == "" {
		cfg.ID = "w1"
	}
	cfg.Handlers = map[string]Handler{"exec": &Exec{Command: []string{"/bin/sh", "-c", script}, KillGrace: time.Second}}
	cfg.Log = testLog(t, cfg.ID)
	if w != nil {
		cfg.Log = logx.New(io.MultiWriter(logxtest.New(t), w), "agentd/"+cfg.ID, "debug")
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{cancel: cancel, done: make(chan error, 1), agent: a}
	go func() { f.done <- a.Run(ctx) }()
	t.Cleanup(func() { f.stop(t) })
	return f
}

// waitFor polls until ok says yes, for at most 10 s; what fails the test
// then.
func waitFor(t *testing.T, ok func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// handlerStopped waits for the agent's line saying it stops a handler.
func handlerStopped(t *testing.T, log *lockedBuffer) {
	t.Helper()
	waitFor(t, func() bool { return strings.Contains(log.String(), "stopping the handler") },
		func() string { return "the handler was not stopped; log:\n" + log.String() })
}

func submit(t *testing.T, st store.Store, reqs ...job.SubmitRequest) {
	t.Helper()
	_, errs := st.Submit(context.Background(), reqs)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// waitJob polls job id until ok says yes, for at most 10 s.
func waitJob(t *testing.T, st store.Store, id string, ok func(*job.Job) bool) *job.Job {
	t.Helper()
	var j *job.Job
	var err error
	waitFor(t, func() bool { j, err = st.Get(context.Background(), id); return err == nil && ok(j) },
		func() string { return fmt.Sprintf("job %s: %+v (err %v): not there within 10s", id, j, err) })
	return j
}

// On a store, the slots run each job's handler in the claim's working
// directory, with its prompt on stdin and its fencing token in
// FARRO_CLAIM_TOKEN, and commit the outcome by the exit status: 0
// succeeded, else failed with the exit code and the stderr tail.
func TestStoreRunsJobs(t *testing.T) {
	t.Parallel()
	local := t.TempDir()
	st := newPGStore(t, local)
	var reqs []job.SubmitRequest
	for i := range 12 {
		p := `{"ok":true}`
		if i%4 == 3 {
			p = `{"fail":true}`
		}
		reqs = append(reqs, job.SubmitRequest{ID: "job-" + string(rune('a'+i)), Kind: "exec", Prompt: []byte(p)})
	}
	submit(t, st, reqs...)
	script := `printf '%s %s %s\n' "$FARRO_CLAIM_TOKEN" "$PWD" "$FARRO_JOB_DIR" > seen; if grep -q fail; then echo broken >&2; exit 3; fi`
	startPG(t, st, local, script, Config{Concurrency: 3, Heartbeat: 100 * time.Millisecond}, nil)
	for i, r := range reqs {
		j := waitJob(t, st, r.ID, func(j *job.Job) bool { return j.Status == job.Succeeded || j.Status == job.Failed })
		dir := filepath.Join(local, "scratch", "w1", r.ID)
		seen, err := os.ReadFile(filepath.Join(dir, "seen"))
		if err != nil {
			t.Fatal(err)
		}
		if want := j.ClaimToken + " " + dir + " " + dir + "\n"; string(seen) != want {
			t.Errorf("%s: the handler saw %q, want %q", r.ID, seen, want)
		}
		if i%4 == 3 {
			if j.Status != job.Failed || j.ExitCode == nil || *j.ExitCode != 3 || !strings.Contains(j.Error, "broken") {
				t.Errorf("%s: %s exit %v error %q, want failed, exit 3, the stderr tail", r.ID, j.Status, j.ExitCode, j.Error)
			}
		} else if j.Status != job.Succeeded || j.Attempts != 1 {
			t.Errorf("%s: %s after %d attempts, want succeeded after 1", r.ID, j.Status, j.Attempts)
		}
	}
	if recs, err := localrun.List(local); err != nil || len(recs) != 0 {
		t.Errorf("handler records left after the runs: %v %v", recs, err)
	}
}

// A claim taken away while its handler runs (recovery) stops the handler
// and writes nothing: the job stays where recovery put it.
func TestStoreLostClaimStopsHandler(t *testing.T) {
	t.Parallel()
	local := t.TempDir()
	st := newPGStore(t, local)
	submit(t, st, job.SubmitRequest{ID: "job-lost", Kind: "exec", Prompt: []byte(`{}`)})
	out := t.TempDir()
	log := &lockedBuffer{}
	f := startPG(t, st, local, `touch `+out+`/started; sleep 20; touch `+out+`/ended`, Config{Heartbeat: 100 * time.Millisecond}, log)
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(out, "started")); return err == nil },
		func() string { return "the handler did not start" })
	// Recorded by the agent once the handler has started.
	var recs []localrun.Entry
	waitFor(t, func() bool { recs, _ = localrun.List(local); return len(recs) > 0 },
		func() string { return "no handler record while it runs" })
	if r := recs[0]; len(recs) != 1 || r.Err != nil || r.Record.JobID != "job-lost" || r.Record.Handler.PID == 0 {
		t.Fatalf("handler record while it runs: %+v", recs)
	}
	time.Sleep(5 * time.Millisecond)
	outs, err := st.Recover(context.Background(), store.RecoverOptions{Actor: "test", SilentAfter: time.Millisecond})
	if err != nil || len(outs) != 1 {
		t.Fatalf("recover: %v %v", outs, err)
	}
	handlerStopped(t, log)
	f.stop(t)
	j, err := st.Get(context.Background(), "job-lost")
	if err != nil || j.Status != job.Stale {
		t.Errorf("job after the lost claim: %v %v, want stale (nothing written by the agent)", j, err)
	}
	if _, err := os.Stat(filepath.Join(out, "ended")); err == nil {
		t.Error("the handler ran to its end")
	}
}

// On shutdown a running job that does not finish within the drain is
// released to queued, its attempt not counted.
func TestStoreDrainReleases(t *testing.T) {
	t.Parallel()
	local := t.TempDir()
	st := newPGStore(t, local)
	submit(t, st, job.SubmitRequest{ID: "job-drain", Kind: "exec", Prompt: []byte(`{}`)})
	f := startPG(t, st, local, `sleep 20`, Config{Heartbeat: 100 * time.Millisecond, DrainTimeout: 200 * time.Millisecond}, nil)
	waitJob(t, st, "job-drain", func(j *job.Job) bool { return j.Status == job.InProgress })
	f.stop(t)
	j, err := st.Get(context.Background(), "job-drain")
	if err != nil || j.Status != job.Queued || j.Attempts != 0 {
		t.Errorf("after the drain: %+v %v, want queued with 0 attempts", j, err)
	}
}

// An operator's kill of a running job stops its handler and commits
// killed.
func TestStoreControlKill(t *testing.T) {
	t.Parallel()
	local := t.TempDir()
	st := newPGStore(t, local)
	submit(t, st, job.SubmitRequest{ID: "job-kill", Kind: "exec", Prompt: []byte(`{}`)})
	startPG(t, st, local, `sleep 20`, Config{Heartbeat: 100 * time.Millisecond, ControlPoll: 20 * time.Millisecond}, nil)
	j := waitJob(t, st, "job-kill", func(j *job.Job) bool { return j.Status == job.InProgress })
	if err := st.RequestControl(context.Background(), "job-kill", job.Control{Action: job.ControlKill, Actor: "test", Attempt: j.Attempts, ClaimToken: j.ClaimToken}); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, st, "job-kill", func(j *job.Job) bool { return j.Status.Terminal() })
	if j.Status != job.Killed || !strings.Contains(j.Reason, "killed by operator") {
		t.Errorf("after kill: %s %q", j.Status, j.Reason)
	}
}

// noRenewStore is a store whose claims cannot renew their lease (the
// database unreachable for heartbeats).
type noRenewStore struct{ *pgstore.Store }

func (s noRenewStore) Claim(ctx context.Context, h job.Holder, o store.ClaimOptions) ([]store.Claim, error) {
	cs, err := s.Store.Claim(ctx, h, o)
	for i := range cs {
		cs[i] = noRenewClaim{cs[i]}
	}
	return cs, err
}

type noRenewClaim struct{ store.Claim }

func (noRenewClaim) Heartbeat(context.Context) error { return errors.New("connection refused (test)") }

// A claim whose lease could not be renewed for a whole lease period
// counts as lost: another host may have the job by then. The handler is
// stopped and nothing is written.
func TestStoreUnrenewedLeaseStopsHandler(t *testing.T) {
	t.Parallel()
	local := t.TempDir()
	st := newPGStore(t, local)
	submit(t, st, job.SubmitRequest{ID: "job-unrenewed", Kind: "exec", Prompt: []byte(`{}`)})
	out := t.TempDir()
	log := &lockedBuffer{}
	f := startPG(t, noRenewStore{st}, local, `touch `+out+`/started; sleep 20; touch `+out+`/ended`,
		Config{Heartbeat: 100 * time.Millisecond, Lease: 500 * time.Millisecond}, log)
	handlerStopped(t, log)
	if !strings.Contains(log.String(), "lease not renewed for 500ms") {
		t.Errorf("the stop does not say why:\n%s", log.String())
	}
	f.stop(t)
	j, err := st.Get(context.Background(), "job-unrenewed")
	if err != nil || j.Status != job.InProgress || j.Attempts != 1 {
		t.Errorf("job: %+v %v, want in-progress still (nothing written; recovery's to move)", j, err)
	}
	if _, err := os.Stat(filepath.Join(out, "ended")); err == nil {
		t.Error("the handler ran to its end")
	}
}
