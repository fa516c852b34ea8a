package watchdog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// On a shared store, the passes remove this host's kept working
// directories whose job finished longer ago than ScratchRetention, in
// one log line, and leave a running job's alone.
func TestSharedSweepsWorkingDirectories(t *testing.T) {
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
	_, errs := st.Submit(ctx, []job.SubmitRequest{{ID: "job-done", Kind: "exec", Prompt: []byte(`{}`), Priority: 1}, {ID: "job-running", Kind: "exec", Prompt: []byte(`{}`)}})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	h := job.Holder{Actor: "agentd/w1", Agent: "w1"}
	cs, err := st.Claim(ctx, h, store.ClaimOptions{Max: 2, Lease: time.Minute})
	if err != nil || len(cs) != 2 || cs[0].Job().ID != "job-done" {
		t.Fatalf("claim: %v %v", cs, err)
	}
	for _, c := range cs {
		if err := os.WriteFile(filepath.Join(c.Dir(), job.OutputFile(job.Stdout, 1)), []byte("out\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs[0].Commit(ctx, job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	buf := logxtest.New(t)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- RunShared(wctx, SharedConfig{Store: st, Local: local, Interval: 50 * time.Millisecond, Grace: time.Minute,
			ScratchRetention: 100 * time.Millisecond, Log: logx.New(buf, Actor, "debug")})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Lstat(cs[0].Dir()); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the finished job's working directory was not removed; log:\n%s", buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done
	if _, err := os.Stat(filepath.Join(cs[1].Dir(), job.OutputFile(job.Stdout, 1))); err != nil {
		t.Fatalf("a running job's working directory: %v", err)
	}
	var found bool
	for _, l := range buf.Lines(t) {
		if l["message"] == "removed working directories of jobs gone or finished longer ago than the retention" {
			found = l["removed"] == float64(1) && l["scratch_retention_ms"] == float64(100)
		}
	}
	if !found {
		t.Fatalf("no log line for the removal:\n%s", buf.String())
	}
}

// failingSweeper is a store whose working directory sweep always fails.
type failingSweeper struct{ store.Store }

func (failingSweeper) SweepScratch(context.Context, time.Duration) ([]string, error) {
	return nil, errors.New("permission denied (test)")
}

// A sweep that keeps failing is said once, not at every pass.
func TestSharedSweepFailureLoggedOnce(t *testing.T) {
	t.Parallel()
	buf := logxtest.New(t)
	s := &shared{cfg: SharedConfig{Store: failingSweeper{}, Log: logx.New(buf, Actor, "debug")}}
	for range 3 {
		s.sweepScratch(context.Background())
	}
	if n := strings.Count(buf.String(), "working directory retention pass failed"); n != 1 {
		t.Fatalf("%d lines for a failing sweep, want 1:\n%s", n, buf.String())
	}
}
