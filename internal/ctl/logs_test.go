package ctl_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

// output writes an attempt's output files into the job's directory, as
// agentd's exec handler leaves them.
func (e *env) output(dir string, attempt int, stdout, stderr string) {
	e.t.Helper()
	for name, text := range map[string]string{job.OutputName(job.Stdout, attempt): stdout, job.OutputName(job.Stderr, attempt): stderr} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) logs(id string, o ctl.LogsOptions) (string, error) {
	e.t.Helper()
	err := e.ctl("").Logs([]string{id}, o)
	return e.stdout.String(), err
}

func TestLogsLatestAttemptBothLabelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.failed("j1")
	dir := e.s.JobDir(job.Failed, "", "j1")
	e.output(dir, 1, "first out\n", "first err\n")
	e.output(dir, 2, "second out", "second err\n") // no final newline on stdout
	out, err := e.logs("j1", ctl.LogsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "==> stdout, attempt 2 <==\nsecond out\n\n==> stderr, attempt 2 <==\nsecond err\n"
	if out != want {
		t.Errorf("logs j1:\n%q\nwant\n%q", out, want)
	}
	// --attempt selects an earlier one; one stream alone is unlabelled.
	if out, err := e.logs("j1", ctl.LogsOptions{Attempt: 1, Stderr: true}); err != nil || out != "first err\n" {
		t.Errorf("logs --attempt 1 --stderr: %q, %v", out, err)
	}
	if out, err := e.logs("j1", ctl.LogsOptions{Stdout: true}); err != nil || out != "second out" {
		t.Errorf("logs --stdout: %q, %v", out, err)
	}
	if out, err := e.logs("j1", ctl.LogsOptions{Attempt: 1, Stdout: true, Stderr: true}); err != nil || !strings.Contains(out, "==> stdout, attempt 1 <==\nfirst out\n") || !strings.Contains(out, "==> stderr, attempt 1 <==\nfirst err\n") {
		t.Errorf("logs --attempt 1 --stdout --stderr: %q, %v", out, err)
	}
}

// logs takes a unique ID prefix, as show and history do.
func TestLogsTakesAnIDPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.failed("build-4711")
	e.output(e.s.JobDir(job.Failed, "", "build-4711"), 1, "made it\n", "")
	if out, err := e.logs("build-47", ctl.LogsOptions{Stdout: true}); err != nil || out != "made it\n" {
		t.Fatalf("logs build-47: %q, %v", out, err)
	}
}

func TestLogsMissingAttemptIsOneLineExit1(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.failed("j2")
	dir := e.s.JobDir(job.Failed, "", "j2")
	e.output(dir, 1, "a\n", "b\n")
	out, err := e.logs("j2", ctl.LogsOptions{Attempt: 3})
	if err == nil || ctl.ExitCode(err) != 1 || out != "" {
		t.Fatalf("logs --attempt 3: %q, %v; want exit 1 and nothing printed", out, err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "j2: no output of attempt 3 (attempts with output: 1)") {
		t.Errorf("error %q", msg)
	}
	// A job that never ran has no output yet.
	e.submit("q1", nil)
	if _, err := e.logs("q1", ctl.LogsOptions{}); err == nil || ctl.ExitCode(err) != 1 || !strings.Contains(err.Error(), "q1: no output yet (queued, it has not run)") {
		t.Errorf("logs of a queued job: %v", err)
	}
	if _, err := e.logs("nosuch", ctl.LogsOptions{}); err == nil || ctl.ExitCode(err) != 1 {
		t.Errorf("logs of a missing job: %v", err)
	}
	if _, err := e.logs("../x", ctl.LogsOptions{}); ctl.ExitCode(err) != 2 {
		t.Errorf("logs of an unsafe ID: %v, want exit 2", err)
	}
	if err := e.ctl("").Logs([]string{"j2"}, ctl.LogsOptions{Attempt: -1}); ctl.ExitCode(err) != 2 {
		t.Errorf("--attempt -1: %v, want exit 2", err)
	}
}

// A running job's output is printed from in-progress/<agent>/, as far as
// it is written.
func TestLogsOfARunningJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claim("r1")
	dir := e.s.JobDir(job.InProgress, "t1", "r1")
	e.output(dir, 1, "working\n", "")
	out, err := e.logs("r1", ctl.LogsOptions{})
	if err != nil || out != "==> stdout, attempt 1 <==\nworking\n\n==> stderr, attempt 1 <==\n" {
		t.Errorf("logs of a running job: %q, %v", out, err)
	}
	// The stderr file not there yet (the handler is starting).
	if err := os.Remove(filepath.Join(dir, job.OutputFile(job.Stderr, 1))); err != nil {
		t.Fatal(err)
	}
	if out, err := e.logs("r1", ctl.LogsOptions{}); err != nil || !strings.Contains(out, "==> stderr, attempt 1: no file <==") {
		t.Errorf("logs without a stderr file: %q, %v", out, err)
	}
	if _, err := e.logs("r1", ctl.LogsOptions{Stderr: true}); err == nil || !strings.Contains(err.Error(), "attempt 1 has no stderr file") {
		t.Errorf("logs --stderr without the file: %v", err)
	}
}

// A FIFO or a symlink where output goes is refused without blocking; the
// legacy stdout.log/stderr.log of a job run before per-attempt files is
// printed as its latest output.
func TestLogsHostileAndLegacyFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.failed("h1")
	dir := e.s.JobDir(job.Failed, "", "h1")
	if err := syscall.Mkfifo(filepath.Join(dir, job.OutputFile(job.Stdout, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The FIFO is not a regular file, so attempt 1 has no output.
	if _, err := e.logs("h1", ctl.LogsOptions{}); err == nil || !strings.Contains(err.Error(), "no output yet") {
		t.Errorf("logs with a FIFO: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, job.OutputFile(job.Stderr, 1)), []byte("e\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.logs("h1", ctl.LogsOptions{Stdout: true}); err == nil || !strings.Contains(err.Error(), "stdout.1.log: not a regular file") {
		t.Errorf("logs --stdout of a FIFO: %v", err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, job.OutputFile(job.Stdout, 2))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, job.OutputFile(job.Stderr, 2)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := e.logs("h1", ctl.LogsOptions{Stdout: true}); err == nil || out != "" || !strings.Contains(err.Error(), "stdout.2.log") {
		t.Errorf("logs --stdout of a symlink: %q, %v", out, err)
	}

	e.failed("old")
	old := e.s.JobDir(job.Failed, "", "old")
	e.output(old, 0, "legacy out\n", "legacy err\n")
	out, err := e.logs("old", ctl.LogsOptions{})
	if err != nil || out != "==> stdout.log, written before per-attempt output <==\nlegacy out\n\n==> stderr.log, written before per-attempt output <==\nlegacy err\n" {
		t.Errorf("legacy logs: %q, %v", out, err)
	}
}
