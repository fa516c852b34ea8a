package watchdog

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/localrun"
	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// handler starts a process in a group of its own, standing in for a
// handler agentd started, and records it under local for claim c.
func handler(t *testing.T, local string, c store.Claim, lease time.Duration) (*exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	id, err := proc.Of(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	j := c.Job()
	if err := localrun.Write(local, localrun.Record{JobID: j.ID, Agent: j.Agent, ClaimToken: c.Token(), Attempt: j.Attempts,
		LeaseMS: lease.Milliseconds(), Handler: id, Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return cmd, exited
}

// On a shared store, each pass recovers the claims whose lease (plus the
// grace) expired, and stops this host's handlers whose claim is no
// longer current, saying so in a log line; a handler whose claim is
// renewed within its lease is left alone.
func TestSharedStopsExpiredHandlers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	url := testpg.NewDatabase(t, testpg.Start(t))
	if _, err := pgstore.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()
	st, err := pgstore.Open(ctx, url, pgstore.WithScratch(filepath.Join(local, "scratch")))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, errs := st.Submit(ctx, []job.SubmitRequest{{ID: "job-expired", Kind: "exec", Prompt: []byte(`{}`), Priority: 1}, {ID: "job-live", Kind: "exec", Prompt: []byte(`{}`)}})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	h := job.Holder{Actor: "agentd/w1", Agent: "w1"}
	expired, err := st.Claim(ctx, h, store.ClaimOptions{Max: 1, Lease: 300 * time.Millisecond})
	if err != nil || len(expired) != 1 || expired[0].Job().ID != "job-expired" {
		t.Fatalf("claim: %v %v", expired, err)
	}
	live, err := st.Claim(ctx, h, store.ClaimOptions{Max: 1, Lease: 300 * time.Millisecond})
	if err != nil || len(live) != 1 {
		t.Fatalf("claim: %v %v", live, err)
	}
	_, expiredDone := handler(t, local, expired[0], 300*time.Millisecond)
	_, liveDone := handler(t, local, live[0], 300*time.Millisecond)

	buf := logxtest.New(t)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- RunShared(wctx, SharedConfig{Store: st, Local: local, Interval: 50 * time.Millisecond, Grace: 200 * time.Millisecond,
			Log: logx.New(buf, Actor, "debug")})
	}()
	// The live claim is renewed all along; the other is left to expire.
	deadline := time.Now().Add(10 * time.Second)
	var stopped bool
	for !stopped {
		if err := live[0].Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-expiredDone:
			stopped = true
		case <-liveDone:
			t.Fatal("the handler of a renewed claim was stopped")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the expired claim's handler was not stopped; log:\n%s", buf.String())
		}
	}
	for {
		j, err := st.Get(ctx, "job-expired")
		if err == nil && j.Status == job.Stale {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the expired claim was not recovered: %v %v", j, err)
		}
		if err := live[0].Heartbeat(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	<-done
	select {
	case <-liveDone:
		t.Fatal("the handler of a renewed claim was stopped")
	default:
	}
	if j, err := st.Get(ctx, "job-live"); err != nil || j.Status != job.InProgress {
		t.Errorf("renewed claim: %v %v, want in-progress", j, err)
	}
	log := buf.String()
	if !strings.Contains(log, `"job_id":"job-expired"`) || !strings.Contains(log, "stopped a handler of this host whose claim is no longer current") {
		t.Errorf("no log line for the stopped handler:\n%s", log)
	}
	if strings.Contains(log, `"job_id":"job-live","agent"`) {
		t.Errorf("the renewed claim's handler was acted on:\n%s", log)
	}
}
