package farrob

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// ClaimChildArg, as the first argument of the benchmark's own executable,
// makes it the child DeadHolder starts (see ClaimChild).
const ClaimChildArg = "-farrob-claim-child"

// DeadAgent is the agent id of the holder DeadHolder leaves behind.
const DeadAgent = "dead"

// ClaimChild is the whole life of DeadHolder's child, args being the
// spool's root and a job id: it claims the job through pkg/job as agentd
// does (lock, owner file naming this process, rename into
// in-progress/dead/), prints "claimed" and waits until its stdin closes
// or, as DeadHolder does, it is SIGKILLed.
func ClaimChild(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: %s SPOOL JOB_ID", ClaimChildArg)
	}
	s, err := job.Open(args[0])
	if err != nil {
		return err
	}
	if _, err := s.Claim(args[1], job.Holder{Actor: "agentd/" + DeadAgent, Agent: DeadAgent}); err != nil {
		return err
	}
	fmt.Println("claimed")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// DeadHolder leaves queued job id of the spool at root in
// in-progress/dead/, held by a process that no longer exists: a child
// (this executable, run with ClaimChildArg, which the benchmark's main
// hands to ClaimChild) claims it and is SIGKILLed as soon as it says so,
// and reaped. Its lock is what a SIGKILLed agentd leaves: an owner file
// naming a PID that is gone.
func DeadHolder(root, id string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, ClaimChildArg, root, id)
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 4096}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("dead holder: %w", err)
	}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(l)
	}()
	var got string
	select {
	case got = <-line:
	case <-time.After(2 * time.Minute):
	}
	_ = cmd.Process.Kill() // by its PID: the one process started here
	_ = cmd.Wait()
	if got != "claimed" {
		return fmt.Errorf("dead holder: the child did not claim %s: %s", id, strings.TrimSpace(stderr.String()))
	}
	s, err := job.Open(root)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(s.JobDir(job.InProgress, DeadAgent, id)); err != nil {
		return fmt.Errorf("dead holder: %s not in in-progress/%s/: %w", id, DeadAgent, err)
	}
	return nil
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return len(p), nil
	}
	q := p
	if len(q) > l.n {
		q = q[:l.n]
	}
	l.n -= len(q)
	if _, err := l.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}
