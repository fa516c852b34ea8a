package ctl_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

func TestActIDsFromStdin(t *testing.T) {
	e := newEnv(t)
	e.submit("a1", nil)
	e.submit("a2", nil)
	e.submit("a3", nil)
	in := "# from ls --json | jq\na1\n\n  a3  \n#a2\n"
	if err := e.ctl(in).Act(ctl.Hold, []string{"-"}, ctl.ActOptions{}); err != nil {
		t.Fatalf("hold -: %v (stderr %q)", err, e.stderr)
	}
	if got, want := lines(e.stdout.String()), []string{"a1: queued -> held", "a3: queued -> held"}; !slices.Equal(got, want) {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got := e.names(job.Held); !slices.Equal(got, []string{"a1", "a3"}) {
		t.Errorf("held/ %q", got)
	}
	// Empty input: nothing to do, not an error.
	if err := e.ctl("\n# none\n").Act(ctl.Release, []string{"-"}, ctl.ActOptions{}); err != nil {
		t.Fatalf("release of no IDs: %v", err)
	}
	if e.stdout.Len() != 0 || !strings.Contains(e.stderr.String(), "no job IDs on stdin") {
		t.Errorf("no IDs: stdout %q stderr %q", e.stdout, e.stderr)
	}
	// A bad line refuses the whole input: nothing is done.
	before := tree(t, e.s.Root)
	for _, in := range []string{"a2\nx/../y\n", "a2\n" + strings.Repeat("z", 5000) + "\n"} {
		err := e.ctl(in).Act(ctl.Cancel, []string{"-"}, ctl.ActOptions{})
		if ctl.ExitCode(err) != 2 || !strings.HasPrefix(err.Error(), "stdin line 2: ") {
			t.Errorf("bad stdin: %v (exit %d)", err, ctl.ExitCode(err))
		}
	}
	// "-" among IDs is refused.
	err := e.ctl("a2\n").Act(ctl.Cancel, []string{"a2", "-"}, ctl.ActOptions{})
	if ctl.ExitCode(err) != 2 || !strings.Contains(err.Error(), "must be the only argument") {
		t.Errorf("ID and -: %v", err)
	}
	if tree(t, e.s.Root) != before {
		t.Fatal("refused input changed the spool")
	}
}

func TestUniquePrefix(t *testing.T) {
	e := newEnv(t)
	e.submit("20261121T114512.000001Z-aaaaaa", nil)
	e.submit("20261121T114512.000002Z-bbbbbb", nil)
	e.submit("20261121T114513.000001Z-cccccc", func(r *job.SubmitRequest) { r.Held = true })
	// User-chosen IDs where one is the prefix of others: exact wins.
	e.submit("deploy", nil)
	e.submit("deploy-2", nil)
	e.submit("deploy-3", nil)

	// A unique prefix acts on its job, named in full.
	if err := e.ctl("").Act(ctl.Hold, []string{"20261121T114512.000002"}, ctl.ActOptions{}); err != nil {
		t.Fatalf("hold prefix: %v (stderr %q)", err, e.stderr)
	}
	if got := e.stdout.String(); got != "20261121T114512.000002Z-bbbbbb: queued -> held\n" {
		t.Errorf("stdout %q", got)
	}
	// Across states: the held one is found by its prefix too.
	if err := e.ctl("").Act(ctl.Release, []string{"20261121T114513"}, ctl.ActOptions{}); err != nil {
		t.Fatalf("release prefix: %v (stderr %q)", err, e.stderr)
	}
	// Ambiguous: one line listing the matches, exit 1, nothing done.
	before := tree(t, e.s.Root)
	err := e.ctl("").Act(ctl.Cancel, []string{"20261121T1145"}, ctl.ActOptions{})
	if ctl.ExitCode(err) != 1 {
		t.Fatalf("ambiguous: exit %d (%v)", ctl.ExitCode(err), err)
	}
	want := "farroctl: 20261121T1145: ambiguous ID prefix: 3 jobs match: 20261121T114512.000001Z-aaaaaa, 20261121T114512.000002Z-bbbbbb, 20261121T114513.000001Z-cccccc\n"
	if got := e.stderr.String(); got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	if tree(t, e.s.Root) != before {
		t.Error("an ambiguous prefix changed the spool")
	}
	// An exact ID wins over the prefix of longer ones.
	if err := e.ctl("").Act(ctl.Hold, []string{"deploy"}, ctl.ActOptions{}); err != nil {
		t.Fatalf("hold deploy: %v (stderr %q)", err, e.stderr)
	}
	if got := e.stdout.String(); got != "deploy: queued -> held\n" {
		t.Errorf("exact: %q", got)
	}
	// Too short to be a prefix: not found, like any missing ID.
	err = e.ctl("").Act(ctl.Hold, []string{"deplo"}, ctl.ActOptions{})
	if ctl.ExitCode(err) != 1 || !strings.Contains(e.stderr.String(), "not found") {
		t.Errorf("short prefix: %v %q", err, e.stderr)
	}
	if got, want := e.names(job.Held), []string{"20261121T114512.000002Z-bbbbbb", "deploy"}; !slices.Equal(got, want) {
		t.Errorf("held/ %q, want %q", got, want)
	}

	// show and history take prefixes too.
	if err := e.ctl("").Show([]string{"20261121T114512.000001"}); err != nil {
		t.Fatalf("show prefix: %v", err)
	}
	if !strings.Contains(e.stdout.String(), `"id": "20261121T114512.000001Z-aaaaaa"`) {
		t.Errorf("show: %s", e.stdout)
	}
	if err := e.ctl("").History([]string{"20261121T114513"}, ctl.HistoryOptions{JSON: true}); err != nil {
		t.Fatalf("history prefix: %v", err)
	}
	if !strings.Contains(e.stdout.String(), `"to":"held"`) {
		t.Errorf("history: %s", e.stdout)
	}
	err = e.ctl("").Show([]string{"deploy-"})
	if ctl.ExitCode(err) != 1 || !strings.Contains(err.Error(), "ambiguous ID prefix: 2 jobs match: deploy-2, deploy-3") {
		t.Errorf("show ambiguous: %v", err)
	}
}

// An ambiguous prefix names at most five matches.
func TestAmbiguousPrefixNamesFive(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 8; i++ {
		e.submit(fmt.Sprintf("batch-%02d", i), nil)
	}
	err := e.ctl("").Show([]string{"batch-"})
	want := "batch-: ambiguous ID prefix: 8 jobs match: batch-00, batch-01, batch-02, batch-03, batch-04, ..."
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestCompleteIDs(t *testing.T) {
	e := newEnv(t)
	e.submit("q-1", nil)
	e.submit("q-2", nil)
	e.submit("h-1", func(r *job.SubmitRequest) { r.Held = true })
	e.failed("f-1")
	for i := 0; i < ctl.MaxCompletions+20; i++ {
		e.submit(fmt.Sprintf("many-%04d", i), func(r *job.SubmitRequest) { r.Held = true })
	}
	// No job.json is read: a job without one is still offered.
	if err := os.Remove(filepath.Join(e.where("q-2").Dir, job.JobFile)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cmd, prefix string
		want        []string
	}{
		{"release", "h", []string{"h-1"}},
		{"hold", "", []string{"q-1", "q-2"}}, // queued, deferred, in-progress
		{"requeue", "", []string{"f-1"}},
		{"cancel", "q-", []string{"q-1", "q-2"}},
		{"show", "f", []string{"f-1"}},
		{"history", "q-1", []string{"q-1"}},
		{"rm", "", nil},
	}
	for _, c := range cases {
		if err := e.ctl("").CompleteIDs(c.cmd, c.prefix); err != nil {
			t.Fatalf("%s %q: %v", c.cmd, c.prefix, err)
		}
		if got := lines(e.stdout.String()); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: got %q, want %q", c.cmd, c.prefix, got, c.want)
		}
	}
	// Bounded.
	if err := e.ctl("").CompleteIDs("release", "many-"); err != nil {
		t.Fatal(err)
	}
	got := lines(e.stdout.String())
	if len(got) != ctl.MaxCompletions || got[0] != "many-0000" {
		t.Errorf("release many-: %d candidates from %q", len(got), got[:1])
	}
	if err := e.ctl("").CompleteIDs("ls", ""); ctl.ExitCode(err) != 2 {
		t.Errorf("ls: %v", err)
	}
}
