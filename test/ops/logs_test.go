package ops

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/pkg/job"
)

// farroctlCode runs farroctl and returns its stdout, stderr and exit code.
func farroctlCode(t *testing.T, spool string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), "farroctl"), append([]string{"--spool", spool}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// TestLogsEndToEnd: a real agentd with --output-max 1KiB runs an exec
// job twice (failed, requeued, succeeded); farroctl logs prints the
// latest attempt, an earlier one with --attempt, the dropped output's
// note, and refuses a missing attempt with one line and exit 1.
func TestLogsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	spool := initSpool(t, dir)
	h := filepath.Join(dir, "handler.sh")
	script := "#!/bin/sh\necho \"err $FARRO_ATTEMPT\" >&2\necho \"attempt $FARRO_ATTEMPT\"\nhead -c 3000 /dev/zero | tr '\\0' x\n[ \"$FARRO_ATTEMPT\" -ge 2 ]\n"
	if err := os.WriteFile(h, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	a := start(t, dir, "w1", []string{"FARRO_OUTPUT_MAX=1KiB"}, "agentd", "--spool", spool, "--id", "w1", "--rescan", "100ms", "--exec", h)
	id := strings.TrimSpace(farroctl(t, spool, `{}`, "submit", "--kind", "exec", "-"))
	jobIn := func(st job.State) func() bool {
		return func() bool {
			j, err := job.ReadJob(filepath.Join(spool, st.Dir(), id))
			return err == nil && j.Status == st
		}
	}
	waitFor(t, 10*time.Second, "attempt 1 to fail", jobIn(job.Failed))
	farroctl(t, spool, "", "requeue", id)
	waitFor(t, 10*time.Second, "attempt 2 to succeed", jobIn(job.Succeeded))
	a.stop(syscall.SIGTERM)

	note := regexp.MustCompile(`\n\[farro: output cap of 1024 bytes \(stdout and stderr together, agentd --output-max\) reached: \d+ bytes of stdout dropped\]\n$`)
	out := farroctl(t, spool, "", "logs", id)
	if !strings.HasPrefix(out, "==> stdout, attempt 2 <==\nattempt 2\nxxx") || !strings.Contains(out, "\n==> stderr, attempt 2 <==\n") {
		t.Errorf("logs ID:\n%s", out)
	}
	first := farroctl(t, spool, "", "logs", id, "--attempt", "1", "--stdout")
	if !strings.HasPrefix(first, "attempt 1\nxxx") || !note.MatchString(first) || len(first) > 1024+200 {
		t.Errorf("logs ID --attempt 1 --stdout (%d bytes):\n%s", len(first), first)
	}
	// The cap is shared by stdout and stderr: stderr's line is kept, or,
	// when stdout's flood reached the cap first, dropped with its note.
	errNote := regexp.MustCompile(`^\[farro: output cap of 1024 bytes \(stdout and stderr together, agentd --output-max\) reached: \d+ bytes of stderr dropped\]\n$`)
	if errOut := farroctl(t, spool, "", "logs", id, "--attempt", "1", "--stderr"); errOut != "" && errOut != "err 1\n" && !errNote.MatchString(errOut) {
		t.Errorf("logs ID --attempt 1 --stderr: %q", errOut)
	}
	j, err := job.ReadJob(filepath.Join(spool, job.Succeeded.Dir(), id))
	if err != nil || j.OutputDropped == 0 {
		t.Errorf("job.json output_dropped %v (%v)", j, err)
	}
	stdout, stderr, code := farroctlCode(t, spool, "logs", id, "--attempt", "3")
	if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "no output of attempt 3 (attempts with output: 1, 2)") {
		t.Errorf("logs --attempt 3: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, stderr, code := farroctlCode(t, spool, "logs", id, "--attempt", "0"); code != 2 || strings.Count(stderr, "\n") != 1 {
		t.Errorf("logs --attempt 0: exit %d, stderr %q", code, stderr)
	}
}

// TestAgentdRefusesABadOutputMax: one line naming the flag, exit 1.
func TestAgentdRefusesABadOutputMax(t *testing.T) {
	dir := t.TempDir()
	spool := initSpool(t, dir)
	cmd := exec.Command(filepath.Join(binaries(t), "agentd"), "--spool", spool, "--id", "w1", "--output-max", "16 MB")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil || cmd.ProcessState.ExitCode() != daemon.ExitConfig || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "--output-max") {
		t.Errorf("agentd --output-max '16 MB': %v, stderr %q", err, stderr.String())
	}
}
