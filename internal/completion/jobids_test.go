package completion

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func jobsApp() *cli.App {
	return &cli.App{
		Name:  "prog",
		Flags: []cli.Flag{&cli.StringFlag{Name: "spool"}},
		Commands: []*cli.Command{
			{Name: "show", ArgsUsage: "ID", Flags: []cli.Flag{&cli.StringFlag{Name: "spool"}}},
			{Name: "hold", ArgsUsage: "ID... | -", Flags: []cli.Flag{&cli.StringFlag{Name: "spool"}, &cli.StringFlag{Name: "reason"}}},
			{Name: "source", Subcommands: []*cli.Command{{Name: "show", ArgsUsage: "NAME"}}},
		},
	}
}

// fakeProg writes a program that records its arguments in dir/args and
// prints three job IDs, as the real one's JobIDsCommand does.
func fakeProg(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fakeprog")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"" + filepath.Join(dir, "args") + "\"\nprintf 'abc-1\\nabc-2\\nzzz\\n'\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func recorded(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		return ""
	}
	return strings.ReplaceAll(strings.TrimSuffix(string(b), "\n"), "\n", "|")
}

func TestBashJobIDs(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("bash is missing: CI installs it (.ci/run)")
		}
		t.Skip("no bash")
	}
	var buf bytes.Buffer
	if err := Write(&buf, jobsApp(), "bash", nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prog := fakeProg(t, dir)
	cases := []struct {
		words []string
		want  string // COMPREPLY
		args  string // the program's arguments, |-separated ("": not run)
	}{
		{[]string{prog, "show", "ab"}, "abc-1 abc-2", "__jobids|show|ab"},
		{[]string{prog, "--spool", "/sp one", "hold", "--reason", "r", ""}, "abc-1 abc-2 zzz", "--spool|/sp one|__jobids|hold|"},
		{[]string{prog, "hold", "--spool=/x", "z"}, "zzz", "--spool|/x|__jobids|hold|z"},
		{[]string{prog, "source", "show", ""}, "", ""},
		{[]string{prog, "hold", "--reason", ""}, "", ""},
	}
	for _, c := range cases {
		_ = os.Remove(filepath.Join(dir, "args"))
		got := strings.Join(complete(t, buf.String(), c.words...), " ")
		if got != c.want {
			t.Errorf("%q: got %q, want %q", c.words[1:], got, c.want)
		}
		if args := recorded(t, dir); args != c.args {
			t.Errorf("%q: program ran with %q, want %q", c.words[1:], args, c.args)
		}
	}
}

func TestZshJobIDs(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("zsh is missing: CI installs it (.ci/run)")
		}
		t.Skip("no zsh")
	}
	var buf bytes.Buffer
	if err := Write(&buf, jobsApp(), "zsh", nil); err != nil {
		t.Fatal(err)
	}
	script := buf.String()
	for _, want := range []string{"'*:job ID:_farro_prog__jobids show'", "'*:job ID:_farro_prog__jobids hold'"} {
		if !strings.Contains(script, want) {
			t.Errorf("zsh script lacks %s", want)
		}
	}
	if strings.Contains(script, "__jobids source") {
		t.Error("source show (NAME) completes job IDs")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "_prog")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := fakeProg(t, dir)
	// The helper as the subcommand's _arguments calls it: words are the
	// subcommand's, the program and the --spool given before the command
	// come from the top-level function; compadd is what offers.
	run := `autoload -Uz compinit && compinit -u -D -d "$2/zcompdump" || exit 3
source "$1" || exit 4
compadd() { while (( $# )) && [[ $1 != -- ]]; do shift; done; shift; print -r -- "offered: $*"; }
_farro_prog=$3 _farro_spool=$4
words=(hold --reason r ab) CURRENT=4 PREFIX=ab
_farro_prog__jobids -J -default- hold
words=(show --spool /cmdline a) CURRENT=4 PREFIX=a
_farro_prog__jobids -J -default- show`
	for _, c := range []struct {
		topSpool string
		want     string
	}{
		{"", "offered: abc-1 abc-2 zzz\noffered: abc-1 abc-2 zzz"},
		{"/top", "offered: abc-1 abc-2 zzz\noffered: abc-1 abc-2 zzz"},
	} {
		out, err := exec.Command("zsh", "-f", "-c", run, "zsh", path, dir, prog, c.topSpool).CombinedOutput()
		if err != nil {
			t.Fatalf("zsh: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != c.want {
			t.Errorf("top --spool %q: got %q, want %q", c.topSpool, got, c.want)
		}
		// The last run was show with a command-line --spool, which wins.
		if args := recorded(t, dir); args != "--spool|/cmdline|__jobids|show|a" {
			t.Errorf("program ran with %q", args)
		}
	}
	// The first call alone, to see the top-level --spool passed on.
	one := strings.SplitN(run, "\nwords=(show", 2)[0]
	out, err := exec.Command("zsh", "-f", "-c", one, "zsh", path, dir, prog, "/top").CombinedOutput()
	if err != nil {
		t.Fatalf("zsh: %v\n%s", err, out)
	}
	if args := recorded(t, dir); args != "--spool|/top|__jobids|hold|ab" {
		t.Errorf("hold with a top-level --spool: program ran with %q", args)
	}
}
