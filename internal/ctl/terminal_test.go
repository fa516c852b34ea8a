package ctl_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

// retry puts killed jobs (and, with --succeeded, succeeded ones) back in
// the queue with attempts 0, one stdout line per ID; anything else is
// refused with one stderr line, and the exit code is 1.
func TestRetryKilledAndSucceededJobs(t *testing.T) {
	e := newEnv(t)
	e.failed("k1")
	if _, err := e.s.Move("k1", job.Failed, job.Killed, "managerd", "failed 1 times: out of attempts", func(j *job.Job) error { j.Error = "exit 1"; return nil }); err != nil {
		t.Fatal(err)
	}
	c := e.claim("ok")
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	e.submit("q", func(r *job.SubmitRequest) { r.Priority = 7 })

	err := e.ctl("").Act(ctl.Retry, []string{"k1", "ok", "q", "nope"}, ctl.ActOptions{})
	if ctl.ExitCode(err) != ctl.ExitFail {
		t.Fatalf("retry: %v (exit %d), want exit 1", err, ctl.ExitCode(err))
	}
	if out := e.stdout.String(); out != "k1: killed -> queued (retried: attempts reset)\n" {
		t.Errorf("stdout %q", out)
	}
	errs := lines(e.stderr.String())
	if len(errs) != 3 || !strings.Contains(errs[0], "ok: is succeeded") || !strings.Contains(errs[0], "--succeeded") ||
		!strings.Contains(errs[1], "q: is queued") || !strings.Contains(errs[2], "nope") {
		t.Errorf("stderr %q", errs)
	}
	j := e.read("k1")
	if j.Status != job.Queued || j.Attempts != 0 || j.Reason != job.ReasonRetried || j.Error != "" {
		t.Errorf("retried k1: %+v", j)
	}
	if j := e.read("q"); j.Status != job.Queued || j.Priority != 7 {
		t.Errorf("q changed: %+v", j)
	}
	if e.where("ok").State != job.Succeeded {
		t.Error("a succeeded job was retried without --succeeded")
	}
	if err := e.ctl("").Act(ctl.Retry, []string{"ok"}, ctl.ActOptions{Succeeded: true}); err != nil {
		t.Fatalf("retry --succeeded: %v (stderr %q)", err, e.stderr)
	}
	if out := e.stdout.String(); out != "ok: succeeded -> queued (retried: attempts reset)\n" {
		t.Errorf("stdout %q", out)
	}
	if j := e.read("ok"); j.Status != job.Queued || j.Attempts != 0 {
		t.Errorf("retried ok: %+v", j)
	}
	if err := e.ctl("").Act(ctl.Hold, []string{"q"}, ctl.ActOptions{Succeeded: true}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Errorf("hold --succeeded: %v, want a usage error", err)
	}
}

// rm deletes terminal jobs for good and refuses the others, one line per
// ID; an unsafe ID is a usage error and nothing is removed.
func TestRemoveTerminalJobs(t *testing.T) {
	e := newEnv(t)
	c := e.claim("ok")
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	e.submit("k", nil)
	if _, err := e.s.Move("k", job.Queued, job.Killed, "farroctl", job.ReasonCancelled, nil); err != nil {
		t.Fatal(err)
	}
	e.submit("q", nil)
	e.claim("run")

	if err := e.ctl("").Act(ctl.Remove, []string{"ok", "a/../b"}, ctl.ActOptions{}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Fatalf("rm with an unsafe ID: %v, want exit 2", err)
	}
	e.where("ok")

	err := e.ctl("").Act(ctl.Remove, []string{"ok", "q", "k", "run"}, ctl.ActOptions{})
	if ctl.ExitCode(err) != ctl.ExitFail {
		t.Fatalf("rm: %v (exit %d), want exit 1", err, ctl.ExitCode(err))
	}
	if out := e.stdout.String(); out != "ok: succeeded -> removed\nk: killed -> removed\n" {
		t.Errorf("stdout %q", out)
	}
	errs := lines(e.stderr.String())
	if len(errs) != 2 || !strings.Contains(errs[0], "q: is queued, not terminal") || !strings.Contains(errs[1], "run: is in-progress, not terminal") {
		t.Errorf("stderr %q", errs)
	}
	for _, id := range []string{"ok", "k"} {
		if _, err := e.s.Locate(id); !errors.Is(err, job.ErrNotFound) {
			t.Errorf("%s after rm: %v", id, err)
		}
	}
	if ents, _ := os.ReadDir(e.s.Path(job.TmpDir)); len(ents) != 0 {
		t.Errorf("tmp/ holds %d entries after rm", len(ents))
	}
	e.where("q")
	e.where("run")
}
