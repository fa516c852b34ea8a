package ops

// Dedicated agents (agentd --kinds) and the queue-wide pause of a kind
// (farroctl pause/resume/paused), with the real binaries.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/pkg/job"
)

// A bad --kinds (a kind without a handler here, an invalid name) refuses
// the start: exit 152 (a configuration error), one line on stderr, the queue untouched.
func TestAgentdBadKinds(t *testing.T) {
	dir := t.TempDir()
	spool := initSpool(t, dir)
	id := strings.TrimSpace(farroctl(t, spool, `{}`, "submit", "--kind", "noop", "-"))
	for args, want := range map[string]string{
		"exec":         `agentd: configuration error: --kinds names "exec", which this agent has no handler for`,
		"noop,nosuch":  `agentd: configuration error: --kinds names "nosuch"`,
		"crawl/fetch":  `agentd: configuration error: --kinds: invalid kind "crawl/fetch"`,
		"noop,,exec":   `agentd: configuration error: --kinds "noop,,exec": an empty kind`,
		"../etc,noop ": `agentd: configuration error: --kinds: invalid kind "../etc"`,
	} {
		cmd := exec.Command(filepath.Join(binaries(t), "agentd"), "--spool", spool, "--id", "w1", "--kinds", args)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("agentd --kinds %q kept running", args)
		}
		if code := cmd.ProcessState.ExitCode(); code != daemon.ExitConfig || !strings.HasPrefix(stderr.String(), want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("agentd --kinds %q: exit %d, stderr %q; want 152 and one line starting %q", args, code, stderr.String(), want)
		}
	}
	if j := queuedJob(t, spool, id); j.Attempts != 0 {
		t.Errorf("noop job: attempts %d", j.Attempts)
	}
}

// agentd --kinds exec --exec /bin/true runs exec jobs and leaves noop
// jobs queued; a second agent pauses nothing until farroctl pause noop,
// after which it leaves new noop jobs queued while running other kinds;
// farroctl resume noop lets it claim them.
func TestAgentdKindsAndPause(t *testing.T) {
	dir := t.TempDir()
	spool := initSpool(t, dir)
	noop1 := strings.TrimSpace(farroctl(t, spool, `{}`, "submit", "--kind", "noop", "--priority", "9", "-"))
	exec1 := strings.TrimSpace(farroctl(t, spool, `{}`, "submit", "--kind", "exec", "-"))
	ex := start(t, dir, "w-exec", nil, "agentd", "--spool", spool, "--id", "w-exec", "--kinds", "exec", "--exec", "/bin/true")
	succeeded := func(id string) func() bool {
		return func() bool {
			_, err := job.ReadJob(filepath.Join(spool, "completed", "succeeded", id))
			return err == nil
		}
	}
	waitFor(t, 10*time.Second, "the exec job to succeed", succeeded(exec1))
	time.Sleep(300 * time.Millisecond) // a few claim rounds: the noop job must stay
	if j := queuedJob(t, spool, noop1); j.Attempts != 0 {
		t.Errorf("noop job claimed by the exec-only agent: attempts %d", j.Attempts)
	}

	out := farroctl(t, spool, "", "pause", "noop", "--reason", "maintenance")
	if !strings.HasPrefix(out, "noop paused: ") {
		t.Fatalf("pause: %q", out)
	}
	if out := farroctl(t, spool, "", "paused"); !strings.Contains(out, "noop") || !strings.Contains(out, "maintenance") {
		t.Errorf("paused:\n%s", out)
	}
	if st := stats(t, spool); len(st.PausedKinds) != 1 || st.PausedKinds[0] != "noop" {
		t.Errorf("stats: paused kinds %q", st.PausedKinds)
	}
	// An agent for every built-in kind starts with noop paused.
	bi := start(t, dir, "w-builtin", nil, "agentd", "--spool", spool, "--id", "w-builtin", "--kinds", "noop,crawl,source.check")
	waitFor(t, 10*time.Second, "w-builtin to be ready", func() bool {
		b, _ := os.ReadFile(bi.log)
		return strings.Contains(string(b), `"message":"agentd ready"`)
	})
	time.Sleep(300 * time.Millisecond)
	if j := queuedJob(t, spool, noop1); j.Attempts != 0 {
		t.Errorf("paused noop job claimed: attempts %d", j.Attempts)
	}
	if out := farroctl(t, spool, "", "ls", "--state", "queued"); !strings.Contains(out, "[kind paused]") {
		t.Errorf("ls does not show the pause:\n%s", out)
	}

	if out := farroctl(t, spool, "", "resume", "noop"); !strings.HasPrefix(out, "noop resumed") {
		t.Fatalf("resume: %q", out)
	}
	waitFor(t, 2*time.Second, "the noop job to run once resumed", succeeded(noop1))
	for _, p := range []*proc{ex, bi} {
		p.stop(syscall.SIGTERM)
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s: exit %d", p.log, code)
		}
	}
	strictLogs(t, ex, bi)
}
