package agent

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// writeScript puts an executable file at path atomically (temp + rename),
// so that a handler started meanwhile never sees it half-written.
func writeScript(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// stays checks for d that job id is queued with attempts 0 and never
// anywhere else; with trials, it may also be seen in-progress for a trial
// start of its handler (which releases it again).
func (f *fixture) stays(t *testing.T, id string, d time.Duration, trials bool) {
	t.Helper()
	queued := 0
	for end := time.Now().Add(d); queued == 0 || time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		locs, err := f.spool.Locate(id)
		if err != nil && !(trials && errors.Is(err, job.ErrNotFound)) {
			t.Fatal(err)
		}
		if trials && (len(locs) != 1 || locs[0].State == job.InProgress) {
			continue // moving (Locate lists one state after another: seen twice or not at all), or on trial
		}
		if len(locs) != 1 || locs[0].State != job.Queued {
			t.Fatalf("job %s left queued: %v", id, locs)
		}
		j, err := job.ReadJob(locs[0].Dir)
		if err != nil {
			if trials {
				continue // claimed between Locate and ReadJob
			}
			t.Fatal(err)
		}
		if j.Attempts != 0 || j.Status != job.Queued {
			t.Fatalf("job %s: %s, attempts %d, want queued and 0 (reason %q)", id, j.Status, j.Attempts, j.Reason)
		}
		queued++
		if time.Now().After(end.Add(5 * time.Second)) {
			t.Fatalf("job %s not seen queued", id)
		}
	}
}

// TestNewRefusesUnusableExec: a missing, non-executable or interpreter-less
// program, or no command at all, is a start error with its own exit status.
func TestNewRefusesUnusableExec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-exec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noInterp := filepath.Join(dir, "no-interp")
	writeScript(t, noInterp, "#!/nonexistent/interp\nexit 0\n")
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		command []string
		want    string
	}{
		{[]string{"/nonexistent"}, `"/nonexistent": no such file`},
		{[]string{"farro-no-such-handler-anywhere"}, "not found in $PATH"},
		{[]string{dir}, "is a directory"},
		{[]string{noInterp}, "its interpreter /nonexistent/interp: no such file"},
		{nil, "no command configured"},
	} {
		_, err := New(Config{Spool: s, ID: "t1", Handlers: map[string]Handler{"noop": Noop, "exec": &Exec{Command: tc.command}}})
		var he *HandlerError
		if !errors.As(err, &he) || he.Kind != "exec" || he.ExitCode() != ExitHandlerUnusable ||
			!errors.Is(err, ErrHandlerUnusable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with exec %q: %v; want a HandlerError (exit %d) saying %q", tc.command, err, ExitHandlerUnusable, tc.want)
		}
	}
	// Without any x bit a file is not executable, even by root.
	if _, err := New(Config{Spool: s, ID: "t1", Handlers: map[string]Handler{"exec": &Exec{Command: []string{notExec}}}}); !errors.Is(err, ErrHandlerUnusable) || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("New with a non-executable file: %v", err)
	}
	if _, err := New(Config{Spool: s, ID: "t1", Handlers: map[string]Handler{"exec": &Exec{Command: []string{"/bin/sh", "-c", "true"}}}}); err != nil {
		t.Errorf("New with /bin/sh: %v", err)
	}
}

// TestKindWithoutHandlerStaysQueued: an agent with no exec handler leaves
// exec jobs queued (never claimed, attempts 0) and runs the kinds it has.
func TestKindWithoutHandlerStaysQueued(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	f := setupLog(t, Config{Concurrency: 2, Handlers: map[string]Handler{"noop": Noop}}, &logs)
	f.submit(t, "x1", "exec", 5) // higher priority than the noop jobs
	f.submit(t, "k1", "mystery", 5)
	f.submit(t, "n1", "noop", 0)
	f.waitState(t, "n1", job.Succeeded)
	f.stays(t, "x1", 300*time.Millisecond, false) // several rescans
	f.stays(t, "k1", 0, false)
	f.submit(t, "n2", "noop", 0)
	f.waitState(t, "n2", job.Succeeded)
	if n := f.parked(); n != 2 {
		t.Errorf("%d jobs parked, want 2", n)
	}
	// A parked job that leaves incoming/ leaves the index.
	if _, err := f.spool.Move("x1", job.Queued, job.Held, "test", "held", nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.parked() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := f.parked(); n != 1 {
		t.Errorf("%d jobs parked after x1 left, want 1", n)
	}
	f.submit(t, "x2", "exec", 0)
	f.stays(t, "x2", 200*time.Millisecond, false)
	f.stop(t)
	out := logs.String()
	if n := strings.Count(out, `no handler for kind \"exec\"`); n != 1 || strings.Count(out, `"level":"error"`) != 2 {
		t.Errorf("want one error line for exec and one for mystery:\n%s", out)
	}
}

// TestVanishedHandlerReleasesJobs: a handler deleted after the start makes
// its jobs go back to queued without an attempt (never failed); once the
// file is back, they run.
func TestVanishedHandlerReleasesJobs(t *testing.T) {
	t.Parallel()
	handler := filepath.Join(t.TempDir(), "handler")
	writeScript(t, handler, "#!/bin/sh\ncat >/dev/null\necho done\n")
	var logs lockedBuffer
	f := setupLog(t, Config{Concurrency: 2, OutageBackoff: 50 * time.Millisecond, OutageBackoffMax: 200 * time.Millisecond,
		Handlers: map[string]Handler{"exec": &Exec{Command: []string{handler}}, "noop": Noop}}, &logs)
	f.submit(t, "e1", "exec", 0)
	f.waitState(t, "e1", job.Succeeded)

	if err := os.Remove(handler); err != nil {
		t.Fatal(err)
	}
	f.submit(t, "e2", "exec", 0)
	f.submit(t, "e3", "exec", 0)
	// e2 is claimed, cannot start, and is released.
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := job.ReadJob(f.spool.JobDir(job.Queued, "", "e2"))
		if err == nil && strings.Contains(j.Reason, "released") {
			if j.Attempts != 0 || !strings.Contains(j.Reason, "cannot start the handler") {
				t.Fatalf("released e2: attempts %d reason %q", j.Attempts, j.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("e2 never released: %+v %v", j, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Through several rechecks the jobs stay queued, and other kinds run.
	f.submit(t, "n1", "noop", 0)
	f.waitState(t, "n1", job.Succeeded)
	f.stays(t, "e2", 600*time.Millisecond, true)
	f.stays(t, "e3", 0, true)

	writeScript(t, handler, "#!/bin/sh\ncat >/dev/null\necho done\n")
	for _, id := range []string{"e2", "e3"} {
		if j := f.waitState(t, id, job.Succeeded); j.Attempts != 1 {
			t.Errorf("%s: attempts %d, want 1", id, j.Attempts)
		}
	}
	f.stop(t)
	out := logs.String()
	if n := strings.Count(out, `"level":"error"`); n != 1 || !strings.Contains(out, "the exec handler cannot be started") {
		t.Errorf("%d error lines for one outage, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "the exec handler runs again") {
		t.Errorf("the end of the outage is not logged:\n%s", out)
	}
}

// lockedBuffer is a log sink safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestUnstartableHandlerNeverFailsJobs: a program that passes the checks
// but cannot be executed (ENOEXEC: neither a script nor a binary) is
// retried with backoff, its jobs never fail; fixed, they run.
func TestUnstartableHandlerNeverFailsJobs(t *testing.T) {
	t.Parallel()
	handler := filepath.Join(t.TempDir(), "handler")
	writeScript(t, handler, "#!/bin/sh\nexit 0\n")
	f := setup(t, Config{OutageBackoff: 20 * time.Millisecond, OutageBackoffMax: 100 * time.Millisecond,
		Handlers: map[string]Handler{"exec": &Exec{Command: []string{handler}}}})
	writeScript(t, handler, "\x00\x01 not a program\n")
	f.submit(t, "u1", "exec", 0)
	f.stays(t, "u1", time.Second, true) // about ten trials
	writeScript(t, handler, "#!/bin/sh\nexit 0\n")
	if j := f.waitState(t, "u1", job.Succeeded); j.Attempts != 1 {
		t.Errorf("attempts %d, want 1", j.Attempts)
	}
}
