package main

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/pkg/job"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests of this package do not run in parallel: urfave/cli writes into
// package-level flags (help, version, and daemon's shared ones) while it
// parses, so two apps must not parse at once in one process; and
// TestEnvironmentSetsFlags sets the environment.

type syncBuffer = logxtest.Buffer

// setup opens a spool with one stale job (attempt 1) in it.
func setup(t *testing.T) *job.Spool {
	t.Helper()
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(job.SubmitRequest{ID: "crashed", Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim("crashed", job.Holder{Actor: "agentd/t", Agent: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecoverLock("crashed", "test", "owner died: test"); err != nil {
		t.Fatal(err)
	}
	return s
}

// runDaemon runs managerd with args until its first pass is done, then
// stops it as SIGTERM would, and returns its stdout.
func runDaemon(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut := logxtest.New(t), &syncBuffer{} // every stdout line is checked strictly when t ends
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- newApp(out, errOut).RunContext(ctx, append([]string{"managerd"}, args...)) }()
	deadline := time.After(10 * time.Second)
	for !strings.Contains(out.String(), "first pass done") {
		select {
		case err := <-done:
			t.Fatalf("managerd exited early: %v\n%s%s", err, out, errOut)
		case <-deadline:
			t.Fatalf("managerd not ready after 10s:\n%s", out)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("managerd: %v", err)
	}
	return out.String()
}

func state(t *testing.T, s *job.Spool, id string) (job.State, *job.Job) {
	t.Helper()
	locs, err := s.Locate(id)
	if err != nil || len(locs) != 1 {
		t.Fatalf("Locate %s: %+v %v", id, locs, err)
	}
	j, err := job.ReadJob(locs[0].Dir)
	if err != nil {
		t.Fatal(err)
	}
	return locs[0].State, j
}

func TestDaemonRunsAPassAndLogsJSONLines(t *testing.T) {
	s := setup(t)
	out := runDaemon(t, "--spool", s.Root, "--rescan", "1h", "--log-level", "debug")
	if st, j := state(t, s, "crashed"); st != job.Queued || j.Reason != "requeued after crash (attempt 1/3)" {
		t.Fatalf("crashed job: %s %q", st, j.Reason)
	}
	var sawTransition, sawStopped bool
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
		if ts, _ := l["timestamp"].(string); len(ts) != len("2006-01-02T15:04:05.000Z") {
			t.Fatalf("timestamp %q lacks milliseconds", ts)
		}
		if ev, ok := l["event"].(map[string]any); ok && ev["type"] == "state_transition" && l["job_id"] == "crashed" {
			sawTransition = true
		}
		sawStopped = sawStopped || l["message"] == "managerd stopped"
	}
	if !sawTransition || !sawStopped {
		t.Fatalf("transition %v, stopped %v in:\n%s", sawTransition, sawStopped, out)
	}
}

func TestEnvironmentSetsFlags(t *testing.T) {
	s := setup(t)
	t.Setenv("FARRO_SPOOL", s.Root)
	t.Setenv("FARRO_MAX_ATTEMPTS", "1")
	t.Setenv("FARRO_RESCAN", "1h")
	runDaemon(t)
	if st, j := state(t, s, "crashed"); st != job.Killed || j.Reason != "crashed and exceeded max retries (1)" {
		t.Fatalf("crashed job: %s %q", st, j.Reason)
	}
}

func TestVersionHelpAndBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr bool
		want    string
	}{
		{[]string{"--version"}, false, "managerd version "},
		{[]string{"--help"}, false, "[$FARRO_MAX_ATTEMPTS]"},
		{[]string{"--max-attempts", "0"}, true, ""},
		{[]string{"--backoff-base", "1m", "--backoff-max", "1s"}, true, ""},
		{[]string{"--retention", "-1s"}, true, ""},
		{[]string{"--domain-cache", "0"}, true, ""},
		{[]string{"--help"}, false, "--domain-cache value"},
		{[]string{"--no-such-flag"}, true, ""},
	} {
		out, errOut := &syncBuffer{}, &syncBuffer{}
		err := newApp(out, errOut).Run(append([]string{"managerd", "--spool", t.TempDir()}, tc.args...))
		if (err != nil) != tc.wantErr || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: err %v, output %q", tc.args, err, out)
		}
	}
}

// One managerd per spool: a second one refuses to start, naming the first,
// with the exit status systemd does not restart.
func TestSecondInstanceRefused(t *testing.T) {
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := registry.AcquireDaemon(s, "managerd", registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	err = newApp(out, errOut).Run([]string{"managerd", "--spool", s.Root})
	if err == nil || !strings.HasPrefix(err.Error(), "managerd is already running as pid ") ||
		daemon.ExitCode(err) != registry.ExitAlreadyRunning {
		t.Fatalf("second managerd: %v (exit %d)", err, daemon.ExitCode(err))
	}
}
