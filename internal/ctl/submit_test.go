package ctl_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

func TestSubmitPrintsOnlyTheID(t *testing.T) {
	e := newEnv(t)
	if err := e.ctl(`{"cmd":["echo","hi"]}`).Submit(ctl.SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	out := e.stdout.String()
	id := strings.TrimSuffix(out, "\n")
	if out != id+"\n" || strings.ContainsAny(id, " \t\n") || job.ValidateID(id) != nil {
		t.Fatalf("stdout %q is not one ID line", out)
	}
	if e.stderr.Len() != 0 {
		t.Fatalf("stderr: %q", e.stderr)
	}
	j := e.read(id)
	if j.Status != job.Queued || j.Kind != "exec" || j.MaxAttempts != job.DefaultMaxAttempts {
		t.Fatalf("job: %+v", j)
	}
	p, err := job.ReadPrompt(e.where(id).Dir)
	if err != nil || string(p) != `{"cmd":["echo","hi"]}` {
		t.Fatalf("prompt %q, %v", p, err)
	}
}

func TestSubmitFlags(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(t.TempDir(), "p.json")
	writeFile(t, file, `{"x": 1}`)
	if err := e.ctl("").Submit(ctl.SubmitOptions{ID: "a", Kind: "noop", Priority: 7, MaxAttempts: 5, Args: []string{file}}); err != nil {
		t.Fatal(err)
	}
	if j := e.read("a"); j.Kind != "noop" || j.Priority != 7 || j.MaxAttempts != 5 || j.Status != job.Queued {
		t.Fatalf("a: %+v", j)
	}
	if err := e.ctl(`{}`).Submit(ctl.SubmitOptions{ID: "b", In: time.Hour, Args: []string{"-"}}); err != nil {
		t.Fatal(err)
	}
	if j := e.read("b"); j.Status != job.Deferred || j.NotBefore == nil || time.Until(*j.NotBefore) < 59*time.Minute {
		t.Fatalf("b: %+v", j)
	}
	at := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	if err := e.ctl(`{}`).Submit(ctl.SubmitOptions{ID: "c", At: at}); err != nil {
		t.Fatal(err)
	}
	if j := e.read("c"); j.Status != job.Deferred || j.NotBefore.Format(time.RFC3339) != at {
		t.Fatalf("c: %+v", j)
	}
	if err := e.ctl(`{}`).Submit(ctl.SubmitOptions{ID: "d", At: "2001-01-01T00:00:00Z"}); err != nil {
		t.Fatal(err)
	}
	if j := e.read("d"); j.Status != job.Queued {
		t.Fatalf("d (past --at): %+v", j)
	}
	if err := e.ctl(`{}`).Submit(ctl.SubmitOptions{ID: "e", Held: true}); err != nil {
		t.Fatal(err)
	}
	if j := e.read("e"); j.Status != job.Held {
		t.Fatalf("e: %+v", j)
	}
}

func TestSubmitRefusalsCreateNothing(t *testing.T) {
	e := newEnv(t)
	e.submit("taken", nil)
	e.submit("done", nil)
	if c, err := e.s.Claim("done", holder); err != nil {
		t.Fatal(err)
	} else if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	running := e.claim("running")
	_ = running
	big := `{"a":"` + strings.Repeat("x", job.MaxPromptSize) + `"}`
	cases := []struct {
		name  string
		stdin string
		o     ctl.SubmitOptions
		code  int
	}{
		{"duplicate queued", `{}`, ctl.SubmitOptions{ID: "taken"}, ctl.ExitFail},
		{"duplicate succeeded", `{}`, ctl.SubmitOptions{ID: "done"}, ctl.ExitFail},
		{"duplicate running", `{}`, ctl.SubmitOptions{ID: "running"}, ctl.ExitFail},
		{"slash", `{}`, ctl.SubmitOptions{ID: "a/b"}, ctl.ExitUsage},
		{"dotdot", `{}`, ctl.SubmitOptions{ID: ".."}, ctl.ExitUsage},
		{"lock suffix", `{}`, ctl.SubmitOptions{ID: "x.lock"}, ctl.ExitUsage},
		{"too long", `{}`, ctl.SubmitOptions{ID: strings.Repeat("a", 129)}, ctl.ExitUsage},
		{"invalid json", `{"a":`, ctl.SubmitOptions{}, ctl.ExitUsage},
		{"two documents", `{} {}`, ctl.SubmitOptions{}, ctl.ExitUsage},
		{"empty", ``, ctl.SubmitOptions{}, ctl.ExitUsage},
		{"over 1 MiB", big, ctl.SubmitOptions{}, ctl.ExitUsage},
		{"unknown kind", `{}`, ctl.SubmitOptions{Kind: "shell"}, ctl.ExitUsage},
		{"negative max attempts", `{}`, ctl.SubmitOptions{MaxAttempts: -1}, ctl.ExitUsage},
		{"in and at", `{}`, ctl.SubmitOptions{In: time.Hour, At: "2030-01-01T00:00:00Z"}, ctl.ExitUsage},
		{"bad at", `{}`, ctl.SubmitOptions{At: "tomorrow"}, ctl.ExitUsage},
		{"held and in", `{}`, ctl.SubmitOptions{Held: true, In: time.Hour}, ctl.ExitUsage},
		{"two files", `{}`, ctl.SubmitOptions{Args: []string{"a", "b"}}, ctl.ExitUsage},
		{"missing file", `{}`, ctl.SubmitOptions{Args: []string{"/nonexistent/p.json"}}, ctl.ExitUsage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tree(t, e.s.Root)
			err := e.ctl(tc.stdin).Submit(tc.o)
			if err == nil {
				t.Fatalf("accepted; stdout %q", e.stdout)
			}
			if got := ctl.ExitCode(err); got != tc.code {
				t.Errorf("exit code %d, want %d (%v)", got, tc.code, err)
			}
			if strings.Contains(err.Error(), "\n") || ctl.IsSilent(err) {
				t.Errorf("error is not one line to print: %q", err)
			}
			if e.stdout.Len() != 0 || e.stderr.Len() != 0 {
				t.Errorf("output: stdout %q stderr %q", e.stdout, e.stderr)
			}
			if after := tree(t, e.s.Root); after != before {
				t.Errorf("spool changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestSubmitInvalidInputDoesNotCreateSpool(t *testing.T) {
	root := filepath.Join(t.TempDir(), "nospool")
	c := &ctl.Ctl{Root: root, Stdin: strings.NewReader("nope"), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	if err := c.Submit(ctl.SubmitOptions{}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("spool created: %v", err)
	}
}

func TestSubmitBatch(t *testing.T) {
	e := newEnv(t)
	e.submit("taken", nil)
	input := strings.Join([]string{
		`{"id":"b1","prompt":{"n":1}}`,
		``,
		`{"id":"b2","kind":"exec","priority":3,"max_attempts":2,"prompt":{"n":2}}`,
		`{"prompt":[1,2,3]}`,
		`{"id":"taken","prompt":{}}`,
		`{"id":"b1","prompt":{}}`,
		`not json`,
		`{"id":"b3"}`,
		`{"id":"../x","prompt":{}}`,
		`{"id":"b4","prompt":{},"colour":"red"}`,
		`{"id":"b5","kind":"bogus","prompt":{}}`,
		`{"id":"b6","held":true,"prompt":{}}`,
		`{"id":"b7","not_before":"2099-01-01T00:00:00Z","prompt":{}}`,
		`{"id":"b8","prompt":{}}`, // no final newline
	}, "\n")
	err := e.ctl(input).Submit(ctl.SubmitOptions{Batch: true, Kind: "noop"})
	if ctl.ExitCode(err) != ctl.ExitFail || !ctl.IsSilent(err) {
		t.Fatalf("err %v (code %d)", err, ctl.ExitCode(err))
	}
	ids := lines(e.stdout.String())
	if len(ids) != 6 || ids[0] != "b1" || ids[1] != "b2" || ids[3] != "b6" || ids[4] != "b7" || ids[5] != "b8" {
		t.Fatalf("stdout ids %q", ids)
	}
	errs := lines(e.stderr.String())
	wantLines := []string{"line 5:", "line 6:", "line 7:", "line 8:", "line 9:", "line 10:", "line 11:"}
	if len(errs) != len(wantLines) {
		t.Fatalf("stderr %q", errs)
	}
	for i, w := range wantLines {
		if !strings.HasPrefix(errs[i], "farroctl: "+w) {
			t.Errorf("stderr line %d = %q, want prefix %q", i, errs[i], w)
		}
	}
	if j := e.read("b1"); j.Kind != "noop" {
		t.Errorf("b1 kind %s (the --kind default)", j.Kind)
	}
	if j := e.read("b2"); j.Kind != "exec" || j.Priority != 3 || j.MaxAttempts != 2 {
		t.Errorf("b2: %+v", j)
	}
	if j := e.read("b6"); j.Status != job.Held {
		t.Errorf("b6: %s", j.Status)
	}
	if j := e.read("b7"); j.Status != job.Deferred {
		t.Errorf("b7: %s", j.Status)
	}
	e.read(ids[2])
	for _, id := range []string{"b3", "b4", "b5"} {
		if _, err := e.s.Locate(id); err == nil {
			t.Errorf("%s created", id)
		}
	}

	// An all-good batch exits 0.
	if err := e.ctl("{\"prompt\":{}}\n{\"prompt\":{}}\n").Submit(ctl.SubmitOptions{Batch: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(lines(e.stdout.String())); n != 2 {
		t.Fatalf("%d ids", n)
	}
	if err := e.ctl("").Submit(ctl.SubmitOptions{Batch: true, ID: "x"}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Fatalf("--id with --batch: %v", err)
	}
}
