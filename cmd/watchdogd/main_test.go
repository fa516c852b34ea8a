package main

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests of this package do not run in parallel: urfave/cli writes into
// package-level flags (help, version, and daemon's shared ones) while it
// parses, so two apps must not parse at once in one process; and
// TestEnvironmentSetsFlags sets the environment.

type syncBuffer = logxtest.Buffer

// setup opens a spool holding one running job whose owner process has
// exited.
func setup(t *testing.T) *job.Spool {
	t.Helper()
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(job.SubmitRequest{ID: "orphan", Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim("orphan", job.Holder{Actor: "agentd/t", Agent: "t"}); err != nil {
		t.Fatal(err)
	}
	child := exec.Command("true")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	o := job.NewOwner("agentd/t", "t")
	o.Identity = proc.Identity{Hostname: o.Hostname, PID: child.ProcessState.Pid(), BootID: o.BootID}
	b, _ := json.Marshal(o)
	if err := fsq.WriteFile(filepath.Join(s.LockPath("orphan"), fsq.OwnerFile), b); err != nil {
		t.Fatal(err)
	}
	return s
}

// runDaemon runs watchdogd with args until the orphan job is in stale/,
// then stops it as SIGTERM would, and returns its stdout.
func runDaemon(t *testing.T, s *job.Spool, args ...string) string {
	t.Helper()
	out, errOut := logxtest.New(t), &syncBuffer{} // every stdout line is checked strictly when t ends
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- newApp(out, errOut).RunContext(ctx, append([]string{"watchdogd"}, args...)) }()
	deadline := time.After(10 * time.Second)
	for {
		if _, err := os.Lstat(s.JobDir(job.Stale, "", "orphan")); err == nil && strings.Contains(out.String(), "first pass done") {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("watchdogd exited early: %v\n%s%s", err, out, errOut)
		case <-deadline:
			t.Fatalf("orphan not recovered after 10s:\n%s", out)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watchdogd: %v", err)
	}
	return out.String()
}

func TestDaemonRecoversAndLogsJSONLines(t *testing.T) {
	s := setup(t)
	out := runDaemon(t, s, "--spool", s.Root, "--interval", "20ms")
	var sawTransition, sawSummary bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		for _, k := range []string{"timestamp", "level", "message", "app", "actor"} {
			if _, ok := l[k]; !ok {
				t.Fatalf("line lacks %s: %s", k, sc.Text())
			}
		}
		if ev, ok := l["event"].(map[string]any); ok && ev["type"] == "state_transition" && l["job_id"] == "orphan" && ev["to"] == "stale" {
			sawTransition = true
		}
		sawSummary = sawSummary || l["message"] == "startup reconcile done"
	}
	if !sawTransition || !sawSummary {
		t.Fatalf("transition %v, summary %v in:\n%s", sawTransition, sawSummary, out)
	}
}

func TestEnvironmentSetsFlags(t *testing.T) {
	s := setup(t)
	t.Setenv("FARRO_SPOOL", s.Root)
	t.Setenv("FARRO_INTERVAL", "20ms")
	t.Setenv("FARRO_NO_NOTIFY", "true")
	out := runDaemon(t, s)
	if !strings.Contains(out, `"interval_ms":20`) || !strings.Contains(out, `"no_notify":true`) {
		t.Fatalf("environment not applied:\n%s", out)
	}
}

func TestVersionHelpAndBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr bool
		want    string
	}{
		{[]string{"--version"}, false, "watchdogd version "},
		{[]string{"--help"}, false, "[$FARRO_CRASH_THRESHOLD]"},
		{[]string{"--interval", "0s"}, true, ""},
		{[]string{"--lock-grace", "-1s"}, true, ""},
		{[]string{"--no-such-flag"}, true, ""},
	} {
		out, errOut := &syncBuffer{}, &syncBuffer{}
		err := newApp(out, errOut).Run(append([]string{"watchdogd", "--spool", t.TempDir()}, tc.args...))
		if (err != nil) != tc.wantErr || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: err %v, output %q", tc.args, err, out)
		}
	}
}

// One watchdogd per spool: a second one refuses to start, naming the first,
// with the exit status systemd does not restart.
func TestSecondInstanceRefused(t *testing.T) {
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := registry.AcquireDaemon(s, "watchdogd", registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	err = newApp(out, errOut).Run([]string{"watchdogd", "--spool", s.Root})
	if err == nil || !strings.HasPrefix(err.Error(), "watchdogd is already running as pid ") ||
		daemon.ExitCode(err) != registry.ExitAlreadyRunning {
		t.Fatalf("second watchdogd: %v (exit %d)", err, daemon.ExitCode(err))
	}
}
