package daemon

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/pkg/job"
)

// configApp is a daemon with flags of every kind and a Validator, like
// agentd's. Its flags are made per app: urfave/cli records values in
// them. The common flags are shared, so these tests set them on the
// command line only, never through the environment.
func configApp(t *testing.T, ran *bool) (*cli.App, *logxtest.Buffer, *logxtest.Buffer) {
	t.Helper()
	stdout, stderr := &logxtest.Buffer{}, &logxtest.Buffer{} // Lines checks log lines strictly
	app := App("testd", "a test daemon", []cli.Flag{
		&cli.StringFlag{Name: "id", Required: true, EnvVars: []string{"FARRO_TEST_ID"}},
		&cli.IntFlag{Name: "slots", Value: 1, EnvVars: []string{"FARRO_TEST_SLOTS"}},
		&cli.DurationFlag{Name: "every", Value: time.Second, EnvVars: []string{"FARRO_TEST_EVERY"}},
		&cli.DurationFlag{Name: "keep", EnvVars: []string{"FARRO_TEST_KEEP"}},
		&cli.BoolFlag{Name: "quiet", EnvVars: []string{"FARRO_TEST_QUIET"}},
	}, func(c *cli.Context) error {
		*ran = true
		if CheckOnly(c) {
			if err := CheckSpool(c.String(SpoolFlag.Name)); err != nil {
				return err
			}
			return ConfigOK(c)
		}
		return nil
	})
	app.Writer, app.ErrWriter = stdout, stderr
	SetValidator(app, func(c *cli.Context) error {
		return First(AtLeast(c, "slots", 1), Positive(c, "every"), NotNegative(c, "keep"))
	})
	return app, stdout, stderr
}

// clearTestEnv unsets the FARRO_ variables of the environment for the
// test (restored after it), so that a developer's own do not count.
func clearTestEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(strings.ToUpper(name), "FARRO_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
}

// A bad value on the command line or in the environment, an unknown or
// incomplete flag, a missing required flag, a stray argument, a log level
// that is not one: each is one *ConfigError (exit 152) naming the flag or
// the variable and the value, with nothing written to stdout or stderr
// (the help text used to go to stdout, the JSON log stream) and the
// daemon not started. Not parallel: it sets the environment.
func TestConfigErrors(t *testing.T) {
	clearTestEnv(t)
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"FARRO_TEST_SLOTS": "abc"}, nil, `FARRO_TEST_SLOTS="abc": not a whole number`},
		{map[string]string{"FARRO_TEST_EVERY": "5"}, nil, `FARRO_TEST_EVERY="5": a duration needs a unit, e.g. 5s, 500ms or 2m`},
		{map[string]string{"FARRO_TEST_EVERY": "soon"}, nil, `FARRO_TEST_EVERY="soon": not a duration (a number with a unit, e.g. 2s, 500ms or 2m)`},
		{map[string]string{"FARRO_TEST_QUIET": "maybe"}, nil, `FARRO_TEST_QUIET="maybe": not a boolean (true or false)`},
		{nil, []string{"--every", "5"}, `--every "5": a duration needs a unit, e.g. 5s, 500ms or 2m`},
		{nil, []string{"--slots", "x"}, `--slots "x": not a whole number`},
		{nil, []string{"--quiet=maybe"}, `--quiet "maybe": not a boolean (true or false)`},
		{nil, []string{"--slot", "2"}, `unknown flag --slot (did you mean --slots?)`},
		{nil, []string{"--verbose"}, `unknown flag --verbose (see testd --help)`},
		{nil, []string{"--every"}, `--every needs a value`},
		{nil, []string{"stray"}, `unexpected argument "stray" (testd takes flags only)`},
		{nil, []string{"--log-level", "verbose"}, `--log-level "verbose": the log level must be one of debug, info, warn, error`},
		{nil, []string{"--spool", ""}, `--spool must not be empty`},
		{nil, []string{"--metrics-addr", "0.0.0.0:9641"}, `--metrics-addr "0.0.0.0:9641" is not a loopback address (0.0.0.0); use 127.0.0.1 or ::1, or add --metrics-allow-remote`},
		// The Validator's rules, named as given.
		{nil, []string{"--slots", "0"}, `--slots 0: must be at least 1`},
		{map[string]string{"FARRO_TEST_SLOTS": "-1"}, nil, `FARRO_TEST_SLOTS="-1": must be at least 1`},
		{map[string]string{"FARRO_TEST_SLOTS": "-1"}, []string{"--slots", "0"}, `--slots 0: must be at least 1`},
		{nil, []string{"--every", "0s"}, `--every 0s: must be positive (a duration with a unit, e.g. 2s)`},
		{map[string]string{"FARRO_TEST_EVERY": "-2s"}, nil, `FARRO_TEST_EVERY="-2s": must be positive (a duration with a unit, e.g. 2s)`},
		{nil, []string{"--keep=-1h"}, `--keep -1h0m0s: must not be negative`},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		ran := false
		app, stdout, stderr := configApp(t, &ran)
		args := append([]string{"testd"}, tc.args...)
		if !slicesContain(tc.args, "--id") && tc.env["FARRO_TEST_ID"] == "" {
			args = append([]string{"testd", "--id", "w1"}, tc.args...)
		}
		err := Run(app, args)
		var ce *ConfigError
		if !errors.As(err, &ce) || ExitCode(err) != ExitConfig || err.Error() != "configuration error: "+tc.want {
			t.Errorf("env %v args %q: %v (exit %d); want a configuration error (exit %d) %q", tc.env, tc.args, err, ExitCode(err), ExitConfig, tc.want)
		}
		if stdout.String() != "" || stderr.String() != "" || ran {
			t.Errorf("env %v args %q: stdout %q, stderr %q, started %v; want nothing", tc.env, tc.args, stdout.String(), stderr.String(), ran)
		}
		for k := range tc.env {
			os.Unsetenv(k)
		}
	}

	// A required flag missing or empty names the flag and its variable.
	for _, env := range []string{"", "set-empty"} {
		if env != "" {
			t.Setenv("FARRO_TEST_ID", "")
		}
		ran := false
		app, stdout, _ := configApp(t, &ran)
		err := Run(app, []string{"testd"})
		if ExitCode(err) != ExitConfig || err.Error() != "configuration error: --id (FARRO_TEST_ID) is required" || ran || stdout.String() != "" {
			t.Errorf("no --id: %v (exit %d), started %v, stdout %q", err, ExitCode(err), ran, stdout.String())
		}
	}
	// The help is still there when asked for.
	ran := false
	app, stdout, _ := configApp(t, &ran)
	if err := Run(app, []string{"testd", "--help"}); err != nil || !strings.Contains(stdout.String(), "--check-config") || ran {
		t.Errorf("--help: %v, started %v, stdout:\n%s", err, ran, stdout.String())
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// A ConfigError is exit status 152, wrapped or not.
func TestConfigErrorExitCode(t *testing.T) {
	t.Parallel()
	err := Configf("bad %s", "x")
	if ExitCode(err) != 152 || ExitCode(errors.Join(errors.New("context"), err)) != 152 || !IsConfigError(err) {
		t.Errorf("ExitCode(%v) = %d", err, ExitCode(err))
	}
	if IsConfigError(errors.New("plain")) || ExitCode(errors.New("plain")) != 1 {
		t.Error("a plain error is a configuration error")
	}
}

func TestUnknownEnv(t *testing.T) {
	t.Parallel()
	got := UnknownEnv([]string{
		"PATH=/bin", "FARRO_SPOOL=/s", "FARRO_CONCURENCY=4", "FARRO_CONCURENCY=5", "farro_spool=x",
		"FARRO_JOB_ID=j1", "FARRO_CLAIM_TOKEN=t", "FARRO_HEARTBEET=2s", "FARRO_XYZZY=1", "FARRO_=1",
		"FARRO_INTERVAL=1s", "FARRO_LOGLEVEL=debug", "FARROX=1", "FARRO_PIPELINE_ARGS=--max-sources 5",
	})
	want := []UnknownVar{
		{"FARRO_CONCURENCY", "FARRO_CONCURRENCY"},
		{"farro_spool", "FARRO_SPOOL"},
		{"FARRO_HEARTBEET", "FARRO_HEARTBEAT"},
		{"FARRO_XYZZY", ""},
		{"FARRO_", ""},
		{"FARRO_LOGLEVEL", "FARRO_LOG_LEVEL"},
	}
	if len(got) != len(want) {
		t.Fatalf("UnknownEnv = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("UnknownEnv[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if m := got[0].Message(); m != "unknown variable FARRO_CONCURENCY in the environment, ignored (did you mean FARRO_CONCURRENCY?)" {
		t.Errorf("message %q", m)
	}
	if m := got[3].Message(); m != "unknown variable FARRO_XYZZY in the environment, ignored" {
		t.Errorf("message %q", m)
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "abc", 0}, {"", "abc", 3}, {"abc", "abd", 1},
		{"abc", "acb", 1}, {"kitten", "sitting", 3}, {"FARRO_CONCURENCY", "FARRO_CONCURRENCY", 1},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// An unknown FARRO_* variable is one warn-level log line at start, with a
// suggestion when a known name is close; the daemon starts all the same.
// A variable of another binary (FARRO_INTERVAL is watchdogd's) is not
// unknown. Not parallel: it sets the environment.
func TestUnknownEnvIsLoggedAndTheDaemonStarts(t *testing.T) {
	clearTestEnv(t)
	t.Setenv("FARRO_CONCURENCY", "4")
	t.Setenv("FARRO_INTERVAL", "1s")
	ran := false
	app, stdout, stderr := configApp(t, &ran)
	if err := Run(app, []string{"testd", "--id", "w1"}); err != nil || !ran {
		t.Fatalf("run: %v, started %v", err, ran)
	}
	lines := stdout.Lines(t)
	if len(lines) != 1 || stderr.String() != "" {
		t.Fatalf("log:\n%s\nstderr %q; want one line", stdout.String(), stderr.String())
	}
	l := lines[0]
	if l["level"] != "warn" || l["variable"] != "FARRO_CONCURENCY" || l["did_you_mean"] != "FARRO_CONCURRENCY" || l["actor"] != "testd/w1" ||
		!strings.Contains(l["message"].(string), "FARRO_CONCURENCY") {
		t.Errorf("warn line: %v", l)
	}
}

// --check-config checks the flags and the spool, says OK on stdout and
// starts nothing: the metrics address is checked, not bound; a spool that
// is an empty directory is left empty; unknown variables are warnings on
// stderr. A missing spool, or a file, is a configuration error. Not
// parallel: it sets the environment.
func TestCheckConfig(t *testing.T) {
	clearTestEnv(t)
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	if _, err := job.Open(spool); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	// A busy port: binding it would fail.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, root := range []string{spool, empty} {
		ran := false
		app, stdout, stderr := configApp(t, &ran)
		err := Run(app, []string{"testd", "--id", "w1", "--spool", root, "--metrics-addr", ln.Addr().String(), "--check-config"})
		if err != nil || stdout.String() != "testd: configuration OK\n" || stderr.String() != "" {
			t.Errorf("--check-config --spool %s: %v, stdout %q, stderr %q", root, err, stdout.String(), stderr.String())
		}
	}
	if ents, err := os.ReadDir(empty); err != nil || len(ents) != 0 {
		t.Errorf("--check-config wrote into the empty spool directory: %v %v", ents, err)
	}

	t.Setenv("FARRO_SPOOOL", "x")
	ran := false
	app, stdout, stderr := configApp(t, &ran)
	if err := Run(app, []string{"testd", "--id", "w1", "--spool", spool, "--check-config"}); err != nil ||
		stdout.String() != "testd: configuration OK\n" ||
		stderr.String() != "testd: warning: unknown variable FARRO_SPOOOL in the environment, ignored (did you mean FARRO_SPOOL?)\n" {
		t.Errorf("unknown variable: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	os.Unsetenv("FARRO_SPOOOL")

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{filepath.Join(dir, "missing"), fifo} {
		ran := false
		app, stdout, _ := configApp(t, &ran)
		err := Run(app, []string{"testd", "--id", "w1", "--spool", root, "--check-config"})
		if ExitCode(err) != ExitConfig || !strings.Contains(err.Error(), "not a farro spool") || stdout.String() != "" {
			t.Errorf("--check-config --spool %s: %v (exit %d), stdout %q", root, err, ExitCode(err), stdout.String())
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("--check-config made the missing spool: %v", err)
	}
}

// OpenSpool refuses what is not a spool as a configuration error (exit
// 152: restarting cannot fix a mistyped --spool) and opens a spool.
func TestOpenSpool(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := OpenSpool(filepath.Join(dir, "missing")); ExitCode(err) != ExitConfig {
		t.Errorf("missing spool: %v (exit %d)", err, ExitCode(err))
	}
	if s, err := OpenSpool(dir); err != nil || s == nil {
		t.Errorf("empty directory: %v", err)
	}
	if err := CheckSpool(dir); err != nil {
		t.Errorf("CheckSpool of a spool: %v", err)
	}
}

// Exit prints an error as one line, "NAME: error", whatever the error
// says, and exits with its status: run in a child process of the test.
func TestExitPrintsOneLine(t *testing.T) {
	t.Parallel()
	if os.Getenv("DAEMON_TEST_EXIT_CHILD") == "1" {
		Exit("testd", Configf("two\nlines"))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestExitPrintsOneLine$")
	cmd.Env = append(os.Environ(), "DAEMON_TEST_EXIT_CHILD=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != ExitConfig || stderr.String() != "testd: configuration error: two lines\n" || stdout.String() != "" {
		t.Errorf("exit %d, stderr %q, stdout %q", code, stderr.String(), stdout.String())
	}
}

// A long value is clipped in the error line, which stays one line.
func TestLongValueIsClipped(t *testing.T) {
	clearTestEnv(t)
	t.Setenv("FARRO_TEST_EVERY", strings.Repeat("x", 1<<20)+"\n")
	ran := false
	app, _, _ := configApp(t, &ran)
	err := Run(app, []string{"testd", "--id", "w1"})
	if ExitCode(err) != ExitConfig || len(err.Error()) > 300 || strings.Contains(err.Error(), "\n") || ran {
		t.Errorf("%d bytes: %.200q", len(err.Error()), err)
	}
}
