package ctl_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/pkg/job"
)

// job.json and ls say the attempt limit that applies: submit writes
// managerd's --max-attempts into a job given none (the built-in default
// when no managerd ever ran), and a job with max_attempts 0 (older jobs,
// the frontier's) is listed with managerd's limit, marked "*".
func TestAttemptLimitIsShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("legacy", nil) // max_attempts 0
	if err := e.ctl("").List(ctl.ListOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	var r ctl.Row
	if err := json.Unmarshal(e.stdout.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.MaxAttempts != job.DefaultMaxAttempts || r.MaxAttemptsFrom != ctl.LimitFromDefault {
		t.Fatalf("no managerd: row %d from %q, want %d from %q", r.MaxAttempts, r.MaxAttemptsFrom, job.DefaultMaxAttempts, ctl.LimitFromDefault)
	}

	m, err := registry.AcquireDaemon(e.s, "managerd", registry.Options{Actor: "managerd", MaxAttempts: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()
	if err := e.ctl(`{"a":1}`).Submit(ctl.SubmitOptions{ID: "fresh"}); err != nil {
		t.Fatal(err)
	}
	if j := e.read("fresh"); j.MaxAttempts != 7 {
		t.Fatalf("submit wrote max_attempts %d, want managerd's 7", j.MaxAttempts)
	}
	if err := e.ctl(`{"prompt":{"a":1},"id":"b1"}` + "\n" + `{"prompt":{"a":1},"id":"b2","max_attempts":2}` + "\n").Submit(ctl.SubmitOptions{Batch: true}); err != nil {
		t.Fatal(err)
	}
	if a, b := e.read("b1").MaxAttempts, e.read("b2").MaxAttempts; a != 7 || b != 2 {
		t.Fatalf("batch wrote max_attempts %d and %d, want 7 (managerd's) and 2 (the line's)", a, b)
	}
	if err := e.ctl("").List(ctl.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, l := range lines(e.stdout.String()) {
		f := strings.Fields(l)
		switch f[0] {
		case "legacy":
			if f[4] != "7*" {
				t.Errorf("legacy's MAX column %q, want 7* (managerd's, not its own)", f[4])
			}
		case "fresh":
			if f[4] != "7" {
				t.Errorf("fresh's MAX column %q, want 7 (its own)", f[4])
			}
		}
	}
	if err := e.ctl("").Show([]string{"legacy"}); err != nil {
		t.Fatal(err)
	}
	var doc ctl.ShowDoc
	if err := json.Unmarshal(e.stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.MaxAttemptsApplied != 7 || doc.MaxAttemptsFrom != ctl.LimitFromManagerd {
		t.Fatalf("show: applied %d from %q", doc.MaxAttemptsApplied, doc.MaxAttemptsFrom)
	}
}

// A deferred job's table row says when it runs.
func TestListSaysWhenDeferredRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := e.ctl(`{"a":1}`).Submit(ctl.SubmitOptions{ID: "later", In: 90 * 60e9}); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl("").List(ctl.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	out := e.stdout.String()
	if !strings.Contains(out, "runs 20") || !strings.Contains(out, "(in 1h29m") && !strings.Contains(out, "(in 1h30m") {
		t.Fatalf("deferred row does not say when it runs:\n%s", out)
	}
}
