package ops

// The daemons' configuration checks, with the real binaries: a mistake is
// one line on stderr and exit status 152 (which the systemd units do not
// restart), an unknown FARRO_* variable is a warning, and --check-config
// checks without starting.

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/logx/logxtest"
)

// cleanEnv is the test's environment without its FARRO_* variables (a
// developer's own would change what the daemons see), plus env.
func cleanEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(strings.ToUpper(kv), "FARRO_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

type result struct {
	code           int
	stdout, stderr string
}

// runOnce runs a daemon that must exit by itself within 10 s.
func runOnce(t *testing.T, dir string, env []string, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), name), args...)
	cmd.Dir, cmd.Env = dir, cleanEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s %q %q kept running\n%s", name, env, args, stderr.String())
	}
	return result{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// spoolTree lists every path under spool: a run that writes nothing
// leaves it as it was.
func spoolTree(t *testing.T, spool string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(spool, func(p string, d fs.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// TestDaemonsRefuseABadConfigInOneLine: a bad value in a FARRO_* variable
// or on the command line, an unknown flag, a log level that is not one, a
// period of zero: each daemon exits at once with status 152, one line on
// stderr naming the flag or variable and the value, nothing on stdout (the
// JSON log stream; the help text used to land there), and writes nothing
// to the spool.
func TestDaemonsRefuseABadConfigInOneLine(t *testing.T) {
	dir := t.TempDir()
	spool := initSpool(t, dir)
	before := spoolTree(t, spool)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"agentd", []string{"FARRO_CONCURRENCY=abc"}, nil, `agentd: configuration error: FARRO_CONCURRENCY="abc": not a whole number`},
		{"agentd", []string{"FARRO_HEARTBEAT=5"}, nil, `agentd: configuration error: FARRO_HEARTBEAT="5": a duration needs a unit, e.g. 5s, 500ms or 2m`},
		{"agentd", nil, []string{"--heartbeat", "5"}, `agentd: configuration error: --heartbeat "5": a duration needs a unit, e.g. 5s, 500ms or 2m`},
		{"agentd", nil, []string{"--concurrency", "0"}, `agentd: configuration error: --concurrency 0: must be at least 1`},
		{"agentd", []string{"FARRO_AGENT_ID="}, nil, `agentd: configuration error: --id (FARRO_AGENT_ID) is required`},
		{"agentd", []string{"FARRO_LOG_LEVEL=verbose"}, nil, `agentd: configuration error: FARRO_LOG_LEVEL="verbose": the log level must be one of debug, info, warn, error`},
		{"managerd", nil, []string{"--log-level", "verbose"}, `managerd: configuration error: --log-level "verbose": the log level must be one of debug, info, warn, error`},
		{"managerd", []string{"FARRO_MAX_ATTEMPTS=0"}, nil, `managerd: configuration error: FARRO_MAX_ATTEMPTS="0": must be at least 1`},
		{"managerd", []string{"FARRO_RETENTION=7"}, nil, `managerd: configuration error: FARRO_RETENTION="7": a duration needs a unit, e.g. 7s, 500ms or 2m`},
		{"watchdogd", []string{"FARRO_INTERVAL=0"}, nil, `watchdogd: configuration error: FARRO_INTERVAL="0": must be positive (a duration with a unit, e.g. 2s)`},
		{"watchdogd", nil, []string{"--intervall", "1s"}, `watchdogd: configuration error: unknown flag --intervall (did you mean --interval?)`},
		{"watchdogd", []string{"FARRO_NO_NOTIFY=maybe"}, nil, `watchdogd: configuration error: FARRO_NO_NOTIFY="maybe": not a boolean (true or false)`},
	} {
		args := append([]string{"--spool", spool}, tc.args...)
		if tc.name == "agentd" && !slices.Contains(tc.env, "FARRO_AGENT_ID=") {
			args = append(args, "--id", "w1")
		}
		r := runOnce(t, dir, tc.env, tc.name, args...)
		if r.code != daemon.ExitConfig || r.stderr != tc.want+"\n" || r.stdout != "" {
			t.Errorf("%s %q %q: exit %d, stderr %q, stdout %q; want exit %d, stderr %q and nothing on stdout",
				tc.name, tc.env, tc.args, r.code, r.stderr, r.stdout, daemon.ExitConfig, tc.want+"\n")
		}
	}
	// A mistyped spool is a configuration error too, one line.
	r := runOnce(t, dir, nil, "managerd", "--spool", filepath.Join(dir, "spoool"))
	if r.code != daemon.ExitConfig || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "not a farro spool") || r.stdout != "" {
		t.Errorf("managerd --spool spoool: %+v", r)
	}
	if after := spoolTree(t, spool); !slices.Equal(before, after) {
		t.Errorf("refused daemons changed the spool:\nbefore %q\nafter  %q", before, after)
	}
}

// TestUnknownFarroVariableIsWarned: agentd started with a misspelled
// FARRO_CONCURENCY logs one warn-level line naming it with a suggestion,
// and runs; FARRO_INTERVAL (watchdogd's, from the shared env file) is not
// reported.
func TestUnknownFarroVariableIsWarned(t *testing.T) {
	dir := t.TempDir()
	spool := initSpool(t, dir)
	a := start(t, dir, "w1", []string{"FARRO_CONCURENCY=4", "FARRO_INTERVAL=1s"}, "agentd", "--spool", spool, "--id", "w1")
	waitFor(t, 10*time.Second, "agentd to be ready", func() bool {
		b, _ := os.ReadFile(a.log)
		return bytes.Contains(b, []byte("agentd ready"))
	})
	a.stop(syscall.SIGTERM)
	strictLogsOnly(t, a)
	b, _ := os.ReadFile(a.log)
	var warned []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		// Only the variables set here: the test's own environment is
		// inherited.
		if v := m["variable"]; v == "FARRO_CONCURENCY" || v == "FARRO_INTERVAL" {
			warned = append(warned, m)
		}
	}
	if len(warned) != 1 || warned[0]["level"] != "warn" || warned[0]["variable"] != "FARRO_CONCURENCY" ||
		warned[0]["did_you_mean"] != "FARRO_CONCURRENCY" ||
		warned[0]["message"] != "unknown variable FARRO_CONCURENCY in the environment, ignored (did you mean FARRO_CONCURRENCY?)" {
		t.Errorf("warnings about variables: %v\n%s", warned, b)
	}
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("agentd exit %d", code)
	}
}

// strictLogsOnly checks every line of each daemon's log strictly.
func strictLogsOnly(t *testing.T, daemons ...*proc) {
	t.Helper()
	for _, p := range daemons {
		b, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		if _, problems := logxtest.Scan(b); len(problems) > 0 {
			t.Errorf("%s: %v", p.log, problems)
		}
	}
}

// TestCheckConfig: --check-config prints "NAME: configuration OK" and
// exits 0 without starting, taking no lock (it answers while an agentd of
// the same id runs) and writing nothing; a bad value, a missing spool, an
// unusable exec handler fail with the status a start would have.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	spool := initSpool(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "handler"), []byte("#!/bin/sh\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := spoolTree(t, spool)
	for _, name := range []string{"agentd", "managerd", "watchdogd"} {
		args := []string{"--spool", spool, "--check-config"}
		if name == "agentd" {
			args = append(args, "--id", "w1", "--exec", "./handler", "--flag")
		}
		r := runOnce(t, dir, []string{"FARRO_METRICS_ADDR=127.0.0.1:1"}, name, args...)
		if r.code != 0 || r.stdout != name+": configuration OK\n" || r.stderr != "" {
			t.Errorf("%s --check-config: %+v", name, r)
		}
	}
	if after := spoolTree(t, spool); !slices.Equal(before, after) {
		t.Errorf("--check-config changed the spool:\nbefore %q\nafter  %q", before, after)
	}

	// While agentd w1 runs (it holds agents/w1.lock), the check of w1's
	// configuration still answers: it takes no lock.
	a := start(t, dir, "w1", nil, "agentd", "--spool", spool, "--id", "w1")
	waitFor(t, 10*time.Second, "agentd w1 to register", func() bool {
		_, err := os.Stat(filepath.Join(spool, "agents", "w1.json"))
		return err == nil
	})
	if r := runOnce(t, dir, []string{"FARRO_SPOOOL=x"}, "agentd", "--spool", spool, "--id", "w1", "--check-config"); r.code != 0 ||
		r.stdout != "agentd: configuration OK\n" ||
		r.stderr != "agentd: warning: unknown variable FARRO_SPOOOL in the environment, ignored (did you mean FARRO_SPOOL?)\n" {
		t.Errorf("agentd --check-config beside a running w1: %+v", r)
	}
	a.stop(syscall.SIGTERM)

	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"agentd", []string{"FARRO_HEARTBEAT=5"}, []string{"--spool", spool, "--id", "w1"}, daemon.ExitConfig, `agentd: configuration error: FARRO_HEARTBEAT="5": a duration needs a unit, e.g. 5s, 500ms or 2m`},
		{"agentd", nil, []string{"--spool", spool, "--id", "w1", "--exec", "/nonexistent/handler"}, 151, `agentd: configuration error: the exec handler cannot be used: "/nonexistent/handler": no such file`},
		{"managerd", nil, []string{"--spool", filepath.Join(dir, "missing")}, daemon.ExitConfig, "managerd: configuration error: spool " + filepath.Join(dir, "missing") + ": not a farro spool: it does not exist"},
		{"watchdogd", []string{"FARRO_CRASH_THRESHOLD=-1s"}, []string{"--spool", spool}, daemon.ExitConfig, `watchdogd: configuration error: FARRO_CRASH_THRESHOLD="-1s": must be positive (a duration with a unit, e.g. 2s)`},
	} {
		r := runOnce(t, dir, tc.env, tc.name, append([]string{"--check-config"}, tc.args...)...) // before --exec CMD
		if r.code != tc.code || !strings.HasPrefix(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
			t.Errorf("%s %q %q --check-config: %+v; want exit %d and one line %q", tc.name, tc.env, tc.args, r, tc.code, tc.want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("--check-config made the missing spool: %v", err)
	}
}

// TestUnitsDoNotRestartAConfigError: every daemon's systemd unit lists
// the configuration error status in RestartPreventExitStatus=.
func TestUnitsDoNotRestartAConfigError(t *testing.T) {
	for _, unit := range []string{"agentd@.service", "managerd.service", "watchdogd.service"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", unit))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^RestartPreventExitStatus=(.*)$`).FindSubmatch(b)
		if m == nil || !slices.Contains(strings.Fields(string(m[1])), strconv.Itoa(daemon.ExitConfig)) {
			t.Errorf("%s: RestartPreventExitStatus= does not list %d: %q", unit, daemon.ExitConfig, m)
		}
	}
}

// TestKnownVariablesMatchTheBinaries: daemon.FlagEnv, the FARRO_*
// variables the daemons do not warn about, is exactly what the four
// binaries read: the ENVIRONMENT section of each one's man page, which is
// generated from its flags.
func TestKnownVariablesMatchTheBinaries(t *testing.T) {
	got := map[string][]string{}
	re := regexp.MustCompile(`\\fB(FARRO_[A-Z0-9_]+)\\fP`)
	for _, name := range []string{"agentd", "managerd", "watchdogd", "farroctl"} {
		r := runOnce(t, t.TempDir(), nil, name, "man")
		_, env, ok := strings.Cut(r.stdout, ".SH ENVIRONMENT")
		if r.code != 0 || !ok {
			t.Fatalf("%s man: exit %d, no ENVIRONMENT section\n%s", name, r.code, r.stderr)
		}
		env, _, _ = strings.Cut(env, ".SH ")
		for _, m := range re.FindAllStringSubmatch(env, -1) {
			got[m[1]] = append(got[m[1]], name)
		}
	}
	for name, bins := range got {
		want := slices.Clone(daemon.FlagEnv[name])
		slices.Sort(want)
		slices.Sort(bins)
		if !slices.Equal(bins, want) {
			t.Errorf("%s is read by %q, daemon.FlagEnv says %q", name, bins, want)
		}
	}
	for name := range daemon.FlagEnv {
		if got[name] == nil {
			t.Errorf("daemon.FlagEnv lists %s, which no binary reads", name)
		}
	}
}
