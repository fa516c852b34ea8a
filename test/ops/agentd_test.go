package ops

// agentd's start-up refusals, with the real binary: a second process
// with the same agent id, an exec handler it cannot use, no handler.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// TestAgentIDSingleton: a second agentd with the id of a running one
// exits at once with the registry's status and a one-line reason naming
// the first; farroctl agents shows the first live, then gone once it is
// killed, and a new agentd takes the id.
func TestAgentIDSingleton(t *testing.T) {
	dir := t.TempDir()
	spool := initSpool(t, dir)
	first := start(t, dir, "w1-first", nil, "agentd", "--spool", spool, "--id", "w1", "--concurrency", "2")
	type listing struct {
		Agents []struct {
			ID    string `json:"id"`
			PID   int    `json:"pid"`
			Slots int    `json:"slots"`
			Live  bool   `json:"live"`
		} `json:"agents"`
	}
	agents := func() listing {
		var l listing
		if err := json.Unmarshal([]byte(farroctl(t, spool, "", "agents", "--json")), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	waitFor(t, 10*time.Second, "w1 to register", func() bool {
		if _, err := os.Stat(filepath.Join(spool, "agents", "w1.json")); err != nil {
			return false
		}
		l := agents()
		return len(l.Agents) == 1 && l.Agents[0].Live && l.Agents[0].PID == first.cmd.Process.Pid && l.Agents[0].Slots == 2
	})

	began := time.Now()
	second := exec.Command(filepath.Join(binaries(t), "agentd"), "--spool", spool, "--id", "w1")
	var stderr bytes.Buffer
	second.Stderr = &stderr
	done := make(chan error, 1)
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- second.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = second.Process.Kill()
		<-done
		t.Fatalf("the second agentd w1 kept running\n%s", stderr.String())
	}
	want := fmt.Sprintf("agentd: agent id w1 is already running as pid %d (started ", first.cmd.Process.Pid)
	if code := second.ProcessState.ExitCode(); code != 150 || !strings.HasPrefix(stderr.String(), want) ||
		strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("second agentd: exit %d after %s, stderr %q; want 150 and %q", code, time.Since(began), stderr.String(), want)
	}

	first.stop(syscall.SIGKILL)
	if l := agents(); len(l.Agents) != 1 || l.Agents[0].Live {
		t.Fatalf("after SIGKILL: %+v", l)
	}
	third := start(t, dir, "w1-third", nil, "agentd", "--spool", spool, "--id", "w1")
	waitFor(t, 10*time.Second, "the new w1 to register", func() bool {
		l := agents()
		return len(l.Agents) == 1 && l.Agents[0].Live && l.Agents[0].PID == third.cmd.Process.Pid
	})
	third.stop(syscall.SIGTERM)
}

// queuedJob reads incoming/<id>/job.json: the job must be queued there,
// with no lock held on it.
func queuedJob(t *testing.T, spool, id string) *job.Job {
	t.Helper()
	j, err := job.ReadJob(filepath.Join(spool, "incoming", id))
	if err != nil {
		t.Fatalf("job %s is not in incoming/: %v", id, err)
	}
	if _, err := os.Lstat(filepath.Join(spool, "incoming", id+job.LockSuffix)); !os.IsNotExist(err) {
		t.Fatalf("job %s is locked: %v", id, err)
	}
	return j
}

// TestAgentdRefusesUnusableHandler: agentd with an --exec program that
// does not exist exits at once with status 151 (which agentd@.service
// lists in RestartPreventExitStatus=) and one line on stderr naming the
// program; the queued exec job is untouched.
func TestAgentdRefusesUnusableHandler(t *testing.T) {
	dir := t.TempDir()
	spool := initSpool(t, dir)
	id := strings.TrimSpace(farroctl(t, spool, `{"x":1}`, "submit", "--kind", "exec", "-"))
	for _, args := range [][]string{
		{"--exec", "/nonexistent/farro-handler", "--flag"},
		{"--exec", "./my-handler"}, // the README's example, before the handler is written
	} {
		cmd := exec.Command(filepath.Join(binaries(t), "agentd"), append([]string{"--spool", spool, "--id", "w1"}, args...)...)
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
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
			t.Fatalf("agentd %q kept running\n%s", args, stderr.String())
		}
		want := fmt.Sprintf("agentd: configuration error: the exec handler cannot be used: %q: no such file\n", args[1])
		if code := cmd.ProcessState.ExitCode(); code != 151 || stderr.String() != want {
			t.Errorf("agentd %q: exit %d, stderr %q; want 151 and %q", args, code, stderr.String(), want)
		}
		if !strings.Contains(stdout.String(), `"level":"error"`) {
			t.Errorf("agentd %q: no error-level log line:\n%s", args, stdout.String())
		}
	}
	if j := queuedJob(t, spool, id); j.Attempts != 0 || j.Status != job.Queued {
		t.Errorf("exec job: %s, attempts %d; want queued, 0", j.Status, j.Attempts)
	}

	// With the handler written, the README's example runs the job: a
	// relative --exec is agentd's working directory's, not the job's.
	if err := os.WriteFile(filepath.Join(dir, "my-handler"), []byte("#!/bin/sh\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "w1.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(binaries(t), "agentd"), "--spool", spool, "--id", "w1", "--exec", "./my-handler")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitFor(t, 10*time.Second, "the exec job to succeed", func() bool {
		j, err := job.ReadJob(filepath.Join(spool, "completed", "succeeded", id))
		return err == nil && j.Attempts == 1
	})
}

// TestAgentdWithoutExec: agentd with no --exec runs the built-in kinds and
// leaves exec jobs queued (not claimed, no attempt), saying so once.
func TestAgentdWithoutExec(t *testing.T) {
	dir := t.TempDir()
	spool := initSpool(t, dir)
	execID := strings.TrimSpace(farroctl(t, spool, `{"x":1}`, "submit", "--kind", "exec", "--priority", "9", "-"))
	a := start(t, dir, "w1", nil, "agentd", "--spool", spool, "--id", "w1", "--rescan", "100ms")
	noopID := strings.TrimSpace(farroctl(t, spool, `{}`, "submit", "--kind", "noop", "-"))
	waitFor(t, 10*time.Second, "the noop job to succeed", func() bool {
		_, err := job.ReadJob(filepath.Join(spool, "completed", "succeeded", noopID))
		return err == nil
	})
	time.Sleep(500 * time.Millisecond) // a few rescans
	if j := queuedJob(t, spool, execID); j.Attempts != 0 || j.Status != job.Queued {
		t.Errorf("exec job: %s, attempts %d; want queued, 0", j.Status, j.Attempts)
	}
	a.stop(syscall.SIGTERM)
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("agentd exit %d", code)
	}
	b, _ := os.ReadFile(a.log)
	if n := strings.Count(string(b), `no handler for kind \"exec\"`); n != 1 {
		t.Errorf("%d lines about the exec jobs left queued, want 1:\n%s", n, b)
	}
}

// TestDaemonsRefuseAMistypedSpool: each daemon given a spool that does not
// exist, or a directory that holds other things, exits with one line on
// stderr naming the spool and creates nothing there.
func TestDaemonsRefuseAMistypedSpool(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "home")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, spool := range []string{filepath.Join(dir, "spoool"), other} {
		for _, d := range []string{"agentd", "managerd", "watchdogd"} {
			cmd := exec.Command(filepath.Join(binaries(t), d), "--spool", spool, "--id", "w1")
			if d != "agentd" {
				cmd.Args = cmd.Args[:3]
			}
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
				t.Fatalf("%s --spool %s kept running", d, spool)
			}
			msg := stderr.String()
			if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(msg, "not a farro spool") || !strings.Contains(msg, spool) || strings.Count(msg, "\n") != 1 {
				t.Errorf("%s --spool %s: exit %d, stderr %q; want a failure and one line naming the spool", d, spool, cmd.ProcessState.ExitCode(), msg)
			}
			if _, err := os.Stat(filepath.Join(spool, "incoming")); err == nil {
				t.Errorf("%s --spool %s made a spool there", d, spool)
			}
		}
	}
}
