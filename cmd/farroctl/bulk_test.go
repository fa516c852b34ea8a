package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/farro-dev/farro/pkg/job"
)

// TestFarroctlBulk checks the actions' selection flags, "-" (IDs on
// stdin), ID prefixes and job-ID completion with the real binary.
func TestFarroctlBulk(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "farroctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := runner{bin: bin}
	spool := newSpool(t)
	s := &job.Spool{Root: spool}
	for _, id := range []string{"20261124T100000.000001Z-aa11", "20261124T100000.000002Z-bb22", "other"} {
		if _, err := s.Submit(job.SubmitRequest{ID: id, Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Submit(job.SubmitRequest{ID: "x1", Kind: "exec", Prompt: []byte(`{}`), Held: true}); err != nil {
		t.Fatal(err)
	}

	t.Run("filter", func(t *testing.T) {
		before := tree(t, spool)
		res := r.run(t, spool, "", "cancel", "--state", "queued", "--kind", "noop")
		if res.code != 0 || res.stdout != "would cancel 3 jobs (state queued, kind noop); run again with --all to do it\n" || res.stderr != "" {
			t.Fatalf("dry run: %+v", res)
		}
		res = r.run(t, spool, "", "rm", "--state", "queued", "--all")
		if res.code != 2 || !oneErrorLine(res.stderr) || !strings.Contains(res.stderr, "rm takes succeeded or killed jobs") {
			t.Fatalf("rm --state queued: %+v", res)
		}
		res = r.run(t, spool, "", "hold", "other", "--state", "queued")
		if res.code != 2 || !oneErrorLine(res.stderr) || !strings.Contains(res.stderr, "not both") {
			t.Fatalf("IDs with a filter: %+v", res)
		}
		if tree(t, spool) != before {
			t.Fatal("the spool changed")
		}
		// Flags after the command, as anywhere.
		res = r.run(t, spool, "", "release", "--all", "--state", "held", "--reason", "bulk")
		if res.code != 0 || res.stdout != "release 1 job (state held): done 1, failed 0\n" {
			t.Fatalf("release --all: %+v", res)
		}
	})

	t.Run("stdin and prefixes", func(t *testing.T) {
		res := r.run(t, spool, "20261124T100000.000001\n# comment\nother\n", "hold", "-")
		if res.code != 0 || res.stdout != "20261124T100000.000001Z-aa11: queued -> held\nother: queued -> held\n" {
			t.Fatalf("hold -: %+v", res)
		}
		res = r.run(t, spool, "", "show", "20261124T10")
		if res.code != 1 || !oneErrorLine(res.stderr) || !strings.Contains(res.stderr, "ambiguous ID prefix: 2 jobs match") {
			t.Fatalf("show ambiguous: %+v", res)
		}
		res = r.run(t, spool, "", "history", "20261124T100000.000002", "--json")
		if res.code != 0 || !strings.Contains(res.stdout, `"to":"queued"`) {
			t.Fatalf("history prefix: %+v", res)
		}
	})

	// The completion scripts run the binary for job IDs: a real bash, and
	// a zsh whose compadd is replaced to print what is offered.
	t.Run("completion", func(t *testing.T) {
		bashScript := `source <("$1" completion bash) || exit 3
COMP_WORDS=("$1" --spool "$2" release 2026); COMP_CWORD=4
_farro_farroctl
printf '%s\n' "${COMPREPLY[@]}"
COMP_WORDS=("$1" cancel --spool "$2" ""); COMP_CWORD=4
_farro_farroctl
printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command("bash", "--norc", "--noprofile", "-c", bashScript, "bash", bin, spool).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		// release: the held ones starting with 2026; cancel: every
		// queued and held one (x1 was released, then nothing else moved).
		want := "20261124T100000.000001Z-aa11\n20261124T100000.000001Z-aa11\n20261124T100000.000002Z-bb22\nother\nx1"
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("bash: got %q, want %q", got, want)
		}
		if _, err := exec.LookPath("zsh"); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("zsh is missing: CI installs it (.ci/run)")
			}
			t.Skip("no zsh")
		}
		dir := t.TempDir()
		script, err := exec.Command(bin, "completion", "zsh").Output()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "_farroctl")
		if err := os.WriteFile(path, script, 0o644); err != nil {
			t.Fatal(err)
		}
		zshScript := `autoload -Uz compinit && compinit -u -D -d "$2/zcompdump" || exit 3
source "$1" || exit 4
compadd() { while (( $# )) && [[ $1 != -- ]]; do shift; done; shift; print -rl -- "$@"; }
_farro_prog=$3
words=(release --spool $4 "") CURRENT=4 PREFIX=""
_farro_farroctl__jobids -J -default- release`
		out, err = exec.Command("zsh", "-f", "-c", zshScript, "zsh", path, dir, bin, spool).CombinedOutput()
		if err != nil {
			t.Fatalf("zsh: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != "20261124T100000.000001Z-aa11\nother" {
			t.Errorf("zsh release: got %q", got)
		}
	})
}
