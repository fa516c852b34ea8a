package registry

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

func spool(t *testing.T) *job.Spool {
	t.Helper()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// One agent id, one process: a second acquisition (another open file
// description, as another process would have) fails with the holder named;
// after the first releases, it succeeds.
func TestAcquireAgentIsExclusive(t *testing.T) {
	t.Parallel()
	s := spool(t)
	first, err := AcquireAgent(s, "w1", Options{Actor: "agentd/w1", Slots: 4, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = AcquireAgent(s, "w1", Options{Actor: "agentd/w1", Wait: 50 * time.Millisecond})
	var are *AlreadyRunningError
	if !errors.As(err, &are) {
		t.Fatalf("second acquisition: %v, want AlreadyRunningError", err)
	}
	want := "agent id w1 is already running as pid " + itoa(os.Getpid()) + " (started "
	if !strings.HasPrefix(err.Error(), want) || are.ExitCode() != ExitAlreadyRunning {
		t.Fatalf("error %q (exit %d), want prefix %q", err, are.ExitCode(), want)
	}
	// Another id is another lock.
	other, err := AcquireAgent(s, "w2", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := AcquireAgent(s, "w1", Options{})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	if err := again.Release(); err != nil {
		t.Fatal(err)
	}
	if err := again.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// managerd and watchdogd: one each per spool, in agents/daemons/, apart
// from an agent of the same name.
func TestAcquireDaemon(t *testing.T) {
	t.Parallel()
	s := spool(t)
	m, err := AcquireDaemon(s, "managerd", Options{Actor: "managerd"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	if _, err := AcquireDaemon(s, "managerd", Options{Wait: time.Millisecond}); err == nil || !strings.HasPrefix(err.Error(), "managerd is already running as pid ") {
		t.Fatalf("second managerd: %v", err)
	}
	w, err := AcquireDaemon(s, "watchdogd", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	a, err := AcquireAgent(s, "managerd", Options{}) // an agent may be called so
	if err != nil {
		t.Fatalf("agent named managerd: %v", err)
	}
	defer a.Release()
	if _, err := os.Stat(s.Path(Dir, DaemonsDir, "managerd.json")); err != nil {
		t.Fatal(err)
	}
}

// A symlink or a FIFO in place of the lock file is refused, without
// blocking; an invalid id is refused.
func TestAcquireHostileLock(t *testing.T) {
	t.Parallel()
	s := spool(t)
	target := filepath.Join(t.TempDir(), "target")
	if err := os.Symlink(target, s.Path(Dir, "ln.lock")); err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireAgent(s, "ln", Options{}); err == nil {
		t.Error("symlinked lock accepted")
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Error("the symlink's target was created")
	}
	if err := syscall.Mkfifo(s.Path(Dir, "fifo.lock"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireAgent(s, "fifo", Options{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO lock: %v", err)
	}
	if _, err := AcquireAgent(s, "../x", Options{}); err == nil {
		t.Error("unsafe id accepted")
	}
}

// The record is kept fresh while held and stamped stopped on release;
// List tells live from gone by the flock and counts the jobs held.
func TestRecordAndList(t *testing.T) {
	t.Parallel()
	s := spool(t)
	live, err := AcquireAgent(s, "live", Options{Actor: "agentd/live", Slots: 3, Version: "v1", Refresh: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Release()
	gone, err := AcquireAgent(s, "gone", Options{Actor: "agentd/gone", Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Release(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(s.AgentDir("live"), d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	started := live.Record().StartedAt
	deadline := time.Now().Add(5 * time.Second)
	for {
		var r Record
		b, _ := os.ReadFile(s.Path(Dir, "live.json"))
		if json.Unmarshal(b, &r) == nil && r.LastSeen.After(started) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("last_seen never refreshed: %s", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	l, err := List(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Agents) != 2 || len(l.Daemons) != 0 {
		t.Fatalf("List = %+v", l)
	}
	g, lv := l.Agents[0], l.Agents[1]
	if g.ID != "gone" || g.Live || g.StoppedAt == nil || g.Slots != 1 || g.JobsHeld != 0 {
		t.Errorf("gone: %+v", g)
	}
	if lv.ID != "live" || !lv.Live || lv.StoppedAt != nil || lv.Slots != 3 || lv.JobsHeld != 2 ||
		lv.PID != os.Getpid() || lv.Version != "v1" || lv.Actor != "agentd/live" {
		t.Errorf("live: %+v", lv)
	}
	// The probe did not keep the lock: the gone id can start again.
	h, err := AcquireAgent(s, "gone", Options{Wait: time.Millisecond})
	if err != nil {
		t.Fatalf("after List: %v", err)
	}
	_ = h.Release()
}
