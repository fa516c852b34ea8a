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

// SpoolAnywhere adds --spool to every command that has no flag of that
// name already, whatever the flag's type and whether the name is its
// name or an alias; other flags' names do not count.
func TestSpoolAnywhereKeepsAnOwnSpoolFlag(t *testing.T) {
	t.Parallel()
	own := []cli.Flag{
		&cli.StringFlag{Name: "spool"},
		&cli.BoolFlag{Name: "x", Aliases: []string{"spool"}},
		&cli.DurationFlag{Name: "spool"},
		&cli.IntFlag{Name: "spool"},
		&cli.Int64Flag{Name: "y", Aliases: []string{"z", "spool"}},
		&cli.StringSliceFlag{Name: "spool"},
		&cli.GenericFlag{Name: "spool"},
		&cli.PathFlag{Name: "spool"}, // a type read through cli.Flag.Names
		&cli.Float64Flag{Aliases: []string{"spool"}, Name: "f"},
	}
	var cmds []*cli.Command
	for _, f := range own {
		cmds = append(cmds, &cli.Command{Name: "c", Flags: []cli.Flag{&cli.StringFlag{Name: "spools", Aliases: []string{"s"}}, f}})
	}
	other := &cli.Command{Name: "other", Flags: []cli.Flag{&cli.StringFlag{Name: "spools", Aliases: []string{"spoo"}}}}
	SpoolAnywhere(append(cmds, other))
	for i, c := range cmds {
		if len(c.Flags) != 2 {
			t.Errorf("command with %T %v: %d flags after SpoolAnywhere, want its own 2", own[i], own[i].Names(), len(c.Flags))
		}
	}
	if len(other.Flags) != 2 || other.Flags[1].Names()[0] != SpoolFlag.Name {
		t.Errorf("a command without --spool got %v", other.Flags)
	}
}

// Looking at a command's flags allocates nothing (cli.Flag.Names ran a
// regular expression per name, and SpoolAnywhere runs over every flag of
// every farroctl command at every start).
func TestSpoolAnywhereLooksWithoutAllocating(t *testing.T) {
	cmds := []*cli.Command{{Name: "c", Flags: []cli.Flag{
		&cli.BoolFlag{Name: "json", Aliases: []string{"j"}}, &cli.DurationFlag{Name: "in"}, &cli.IntFlag{Name: "priority"},
		&cli.Int64Flag{Name: "n"}, &cli.StringSliceFlag{Name: "s"}, &cli.GenericFlag{Name: "g"}, &cli.StringFlag{Name: "spool"},
	}}}
	if n := testing.AllocsPerRun(10, func() { SpoolAnywhere(cmds) }); n != 0 {
		t.Errorf("SpoolAnywhere over one command of 7 flags: %v allocations, want 0", n)
	}
}
