package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// F8/F14: once a sync of the spool fails, agentd stops acknowledging: Run
// returns an ErrDurability error within seconds, and no job is committed.
func TestRunStopsWhenDurabilityIsLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		okSync int32 // syncs that succeed before the first failure
		loc    job.State
		status job.State
	}{
		// The claim's barrier fails: the claim is rolled back.
		{"claim", 0, job.Queued, job.Queued},
		// The claim's barrier passes, the commit's first one fails: the
		// job stays in-progress, its job.json not replaced, for recovery.
		{"commit", 1, job.InProgress, job.InProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			// The submitter is another process with its own barrier.
			sub, err := job.Open(root)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sub.Submit(job.SubmitRequest{ID: "d1", Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			var syncs atomic.Int32
			s, err := job.Open(root, job.WithBarrierSync(func(int) error {
				if syncs.Add(1) > tc.okSync {
					return syscall.EIO
				}
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			ran := make(chan struct{}, 1)
			a, err := New(Config{Spool: s, ID: "t1", Log: testLog(t, "t1"), Rescan: 50 * time.Millisecond,
				DrainTimeout: time.Minute, // a drain would outlast the deadline below
				Handlers: map[string]Handler{"noop": HandlerFunc(func(context.Context, Task) Result {
					ran <- struct{}{}
					return Result{}
				})}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			select {
			case err := <-done:
				if !errors.Is(err, fsq.ErrDurability) || !errors.Is(err, syscall.EIO) {
					t.Fatalf("Run = %v, want ErrDurability (EIO)", err)
				}
			case <-time.After(10 * time.Second):
				cancel()
				<-done
				t.Fatal("Run did not stop within 10s of a failed sync")
			}
			if got := len(ran) == 1; got != (tc.okSync > 0) {
				t.Fatalf("handler ran: %v", got)
			}
			locs, err := sub.Locate("d1")
			if err != nil || len(locs) != 1 || locs[0].State != tc.loc {
				t.Fatalf("job found in %+v (%v), want only %s", locs, err, tc.loc.Dir())
			}
			j, err := job.ReadJob(locs[0].Dir)
			if err != nil || j.Status != tc.status {
				t.Fatalf("job.json = %+v, %v; want status %s", j, err, tc.status)
			}
			if n := syncs.Load(); n != tc.okSync+1 {
				t.Fatalf("%d syncs tried, want %d (none after the failure)", n, tc.okSync+1)
			}
		})
	}
}

// F3: a FIFO (or any hostile entry) as control.json neither wedges the
// supervisor nor floods the log: it is moved to corrupt/ and the job keeps
// running, heartbeating and obeying later requests.
func TestHostileControlIsQuarantined(t *testing.T) {
	t.Parallel()
	started := make(chan string, 1)
	f := setup(t, Config{ControlPoll: 20 * time.Millisecond, Heartbeat: 20 * time.Millisecond,
		Handlers: map[string]Handler{"block": blocker(started)}})
	f.submit(t, "f1", "block", 0)
	<-started
	dir := f.spool.JobDir(job.InProgress, "t1", "f1")
	ctl := filepath.Join(dir, job.ControlFile)
	if err := syscall.Mkfifo(ctl, 0o644); err != nil {
		t.Fatal(err)
	}
	var moved string
	deadline := time.Now().Add(5 * time.Second)
	for moved == "" && time.Now().Before(deadline) {
		des, _ := os.ReadDir(f.spool.Path(job.CorruptDir))
		for _, de := range des {
			if strings.HasPrefix(de.Name(), job.ControlFile+".") && !strings.HasSuffix(de.Name(), ".quarantine.json") {
				moved = f.spool.Path(job.CorruptDir, de.Name())
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if moved == "" {
		// Unblock a supervisor stuck in open(2) so that the test ends.
		if w, err := os.OpenFile(ctl, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("the FIFO control.json was not moved to corrupt/ within 5s")
	}
	if fi, err := os.Lstat(moved); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("quarantined entry: %v, %v", fi, err)
	}
	if _, err := os.Lstat(moved + ".quarantine.json"); err != nil {
		t.Fatalf("no quarantine note: %v", err)
	}
	if _, err := os.Lstat(ctl); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("control.json still in the job dir: %v", err)
	}
	// The supervisor is alive: heartbeats go on, and a real request works.
	before := *f.waitState(t, "f1", job.InProgress).LastHeartbeat
	time.Sleep(100 * time.Millisecond)
	if after := f.waitState(t, "f1", job.InProgress).LastHeartbeat; !after.After(before) {
		t.Fatalf("no heartbeat since the FIFO: %v then %v", before, after)
	}
	if err := f.spool.RequestControl("t1", "f1", job.Control{Action: job.ControlKill, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	f.waitState(t, "f1", job.Killed)
}
