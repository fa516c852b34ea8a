package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/urfave/cli/v2"
)

// spoolOf runs an app with --spool and one command, and returns the spool
// that command would use.
func spoolOf(t *testing.T, args ...string) string {
	t.Helper()
	var got string
	flag := *SpoolFlag // cli records a value from the environment in the flag itself: one per run
	app := &cli.App{Name: "farroctl", Flags: []cli.Flag{&flag},
		Commands: []*cli.Command{{Name: "stats", Action: func(c *cli.Context) error { got = SpoolFor(c); return nil }},
			{Name: "crawl", Subcommands: []*cli.Command{{Name: "status", Action: func(c *cli.Context) error { got = SpoolFor(c); return nil }}}}}}
	SpoolAnywhere(app.Commands)
	if err := app.Run(append([]string{"farroctl"}, args...)); err != nil {
		t.Fatal(err)
	}
	return got
}

// A packaged farroctl given neither --spool nor FARRO_SPOOL takes the
// spool the units use, from their environment file (the last uncommented
// assignment, quotes removed); --spool and FARRO_SPOOL still win, and a
// source build (no EnvFile) keeps its default. Not parallel: it sets
// EnvFile and the environment.
func TestSpoolFor(t *testing.T) {
	env := filepath.Join(t.TempDir(), "farro.env")
	if err := os.WriteFile(env, []byte("# comment\n#FARRO_SPOOL=/nowhere\nFARRO_SPOOL=/first\nFARRO_SPOOL=\"/srv/farro spool\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := EnvFile
	t.Cleanup(func() { EnvFile = old })
	t.Setenv("FARRO_SPOOL", "")
	os.Unsetenv("FARRO_SPOOL")

	EnvFile = ""
	if got := spoolOf(t, "stats"); got != DefaultSpool {
		t.Errorf("source build: %q, want %q", got, DefaultSpool)
	}
	EnvFile = env
	if got := spoolOf(t, "stats"); got != "/srv/farro spool" {
		t.Errorf("packaged, nothing given: %q, want the env file's", got)
	}
	if got := spoolOf(t, "--spool", "/given", "stats"); got != "/given" {
		t.Errorf("--spool: %q", got)
	}
	// After the command too, and in a subcommand; the nearest wins.
	if got := spoolOf(t, "stats", "--spool", "/after"); got != "/after" {
		t.Errorf("stats --spool: %q", got)
	}
	if got := spoolOf(t, "--spool", "/before", "crawl", "status", "--spool", "/after"); got != "/after" {
		t.Errorf("crawl status --spool after --spool: %q", got)
	}
	if got := spoolOf(t, "--spool", "/before", "crawl", "status"); got != "/before" {
		t.Errorf("--spool before crawl status: %q (a command's own copy of the flag must not shadow it)", got)
	}
	os.Setenv("FARRO_SPOOL", "/from-env")
	if got := spoolOf(t, "stats"); got != "/from-env" {
		t.Errorf("FARRO_SPOOL: %q", got)
	}
	if got := spoolOf(t, "--spool", "/given", "crawl", "status"); got != "/given" {
		t.Errorf("--spool with FARRO_SPOOL set: %q, want the command line's", got)
	}
	os.Setenv("FARRO_SPOOL", "")
	if got := spoolOf(t, "--spool", "/given", "stats"); got != "/given" {
		t.Errorf("--spool with FARRO_SPOOL empty: %q", got)
	}
	os.Unsetenv("FARRO_SPOOL")
	EnvFile = filepath.Join(t.TempDir(), "missing.env")
	if got := spoolOf(t, "stats"); got != DefaultSpool {
		t.Errorf("packaged, no env file: %q, want %q", got, DefaultSpool)
	}
}
