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

func testApp() *cli.App {
	return &cli.App{
		Name:  "prog",
		Flags: []cli.Flag{&cli.StringFlag{Name: "spool", Usage: "spool directory"}},
		Commands: []*cli.Command{
			{Name: "ls", Usage: "list jobs", Flags: []cli.Flag{
				&cli.StringSliceFlag{Name: "state", Usage: "only jobs in state S"},
				&cli.BoolFlag{Name: "json", Usage: "print JSON [lines]: it's fine"},
			}},
			{Name: "submit", Usage: "create a job", ArgsUsage: "[FILE | -]", Flags: []cli.Flag{
				&cli.StringFlag{Name: "kind", Usage: "handler kind"},
				&cli.IntFlag{Name: "priority", Usage: "higher first"},
			}},
			{Name: "crawl", Usage: "crawls", Subcommands: []*cli.Command{
				{Name: "start", Usage: "start a crawl", Flags: []cli.Flag{&cli.StringSliceFlag{Name: "seed"}}},
				{Name: "status", Usage: "show a crawl"},
			}},
			{Name: "secret", Hidden: true},
		},
	}
}

// complete runs the bash completion function on words (the last one is
// being completed) and returns COMPREPLY.
func complete(t *testing.T, script string, words ...string) []string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "prog.bash")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	var quoted []string
	for _, w := range words {
		quoted = append(quoted, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
	}
	prog := `source "$1" || exit 3
COMP_WORDS=(` + strings.Join(quoted, " ") + `)
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_farro_prog
printf '%s\n' "${COMPREPLY[@]}"`
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", prog, "bash", path)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			got = append(got, l)
		}
	}
	return got
}

func TestBashScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("bash is missing: CI installs it (.ci/run)")
		}
		t.Skip("no bash")
	}
	var buf bytes.Buffer
	if err := Write(&buf, testApp(), "bash", nil); err != nil {
		t.Fatal(err)
	}
	script := buf.String()

	out, err := exec.Command("bash", "--norc", "-c", script+"\ncomplete -p prog").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "complete -F _farro_prog prog" {
		t.Fatalf("complete -p prog: %v %q", err, out)
	}
	cases := []struct {
		words []string
		want  string // space-separated, in order
	}{
		{[]string{"prog", ""}, "ls submit crawl"},
		{[]string{"prog", "s"}, "submit"},
		{[]string{"prog", "--"}, "--spool --help --version"},
		{[]string{"prog", "--spool", "/tmp", "l"}, "ls"},
		{[]string{"prog", "ls", "--"}, "--state --json --help"},
		{[]string{"prog", "ls", "--state", "in"}, "in-progress"},
		{[]string{"prog", "ls", "--state=de"}, "--state=deferred"},
		{[]string{"prog", "submit", "--kind", ""}, "exec noop crawl.fetch"},
		{[]string{"prog", "submit", "--priority", ""}, ""},
		{[]string{"prog", "crawl", "st"}, "start status"},
		{[]string{"prog", "crawl", "start", "--s"}, "--seed"},
		{[]string{"prog", "sec"}, ""},
	}
	for _, c := range cases {
		got := strings.Join(complete(t, script, c.words...), " ")
		if got != c.want {
			t.Errorf("%q: got %q, want %q", c.words, got, c.want)
		}
	}
	// File arguments complete file names.
	if got := complete(t, script, "prog", "submit", "prog.b"); len(got) != 1 || got[0] != "prog.bash" {
		t.Errorf("submit FILE: got %q, want prog.bash", got)
	}
}

func TestZshScript(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("zsh is missing: CI installs it (.ci/run)")
		}
		t.Skip("no zsh")
	}
	var buf bytes.Buffer
	if err := Write(&buf, testApp(), "zsh", nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "_prog")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("zsh", "-n", path).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	prog := `autoload -Uz compinit && compinit -u -D -d "$2/zcompdump" || exit 3
source "$1" || exit 4
print -r -- "${_comps[prog]}"
(( $+functions[_farro_prog_crawl_start] )) && print has-sub`
	out, err := exec.Command("zsh", "-f", "-c", prog, "zsh", path, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("zsh: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "_farro_prog\nhas-sub" {
		t.Fatalf("zsh registration: %q", got)
	}
	if strings.Contains(buf.String(), "secret") {
		t.Error("hidden command in the zsh script")
	}
}

func TestUnknownShell(t *testing.T) {
	if err := Write(&bytes.Buffer{}, testApp(), "fish", nil); err == nil {
		t.Fatal("fish accepted")
	}
}
