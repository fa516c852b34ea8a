package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// Task is what a handler gets: the claimed job's envelope.
type Task struct {
	Env job.Envelope
	// Started, if set, is called with the pid of the process a handler
	// starts for the job (the leader of its own process group), so that
	// it is recorded in the job's lock for recovery.
	Started func(pid int)
	// Fence, if set, proves that the claim is still current (see
	// job.Claimed.Fence). A handler calls it (through Fenced) right
	// before it puts its output in place in the job directory.
	Fence func() error
}

// Fenced returns Fence's verdict, or nil when the task has no fence.
func (t Task) Fenced() error {
	if t.Fence == nil {
		return nil
	}
	return t.Fence()
}

// Result is a handler's outcome. A nil Err means succeeded.
type Result struct {
	Err      error
	ExitCode *int
}

// Handler runs one kind of job. It must return promptly once ctx is done.
type Handler interface {
	Run(ctx context.Context, t Task) Result
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, t Task) Result

// Run calls f.
func (f HandlerFunc) Run(ctx context.Context, t Task) Result { return f(ctx, t) }

// Noop succeeds at once: the built-in kind for benchmarks.
var Noop = HandlerFunc(func(context.Context, Task) Result { return Result{} })

// Exec runs a fixed command for each job (never a shell built from job
// data): prompt.json on stdin, FARRO_JOB_ID, FARRO_JOB_DIR, FARRO_ATTEMPT
// and FARRO_CORRELATION_ID in the environment, stdout and stderr captured
// into the job directory. Exit 0 means succeeded. When ctx ends (timeout,
// cancel, drain) the whole process group gets SIGTERM, then SIGKILL after
// KillGrace.
type Exec struct {
	Command   []string
	KillGrace time.Duration
}

// stderrTail bounds the error text kept in job.json.
const stderrTail = 2048

// Run implements Handler.
func (e *Exec) Run(ctx context.Context, t Task) Result {
	if len(e.Command) == 0 {
		return Result{Err: errors.New("agentd has no --exec command for exec jobs")}
	}
	dir, j := t.Env.Runtime.Dir, t.Env.Lifecycle
	stdout, err := os.OpenFile(filepath.Join(dir, job.StdoutFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return Result{Err: fmt.Errorf("capture stdout: %w", err)}
	}
	defer stdout.Close()
	stderrPath := filepath.Join(dir, job.StderrFile)
	stderr, err := os.OpenFile(stderrPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return Result{Err: fmt.Errorf("capture stderr: %w", err)}
	}
	defer stderr.Close()
	prompt, err := os.Open(filepath.Join(dir, job.PromptFile))
	if err != nil {
		return Result{Err: fmt.Errorf("prompt: %w", err)}
	}
	defer prompt.Close()

	cmd := exec.Command(e.Command[0], e.Command[1:]...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = prompt, stdout, stderr
	cmd.Env = append(os.Environ(),
		job.EnvJobID+"="+j.ID,
		job.EnvJobDir+"="+dir,
		"FARRO_ATTEMPT="+strconv.Itoa(j.Attempts),
		"FARRO_CORRELATION_ID="+j.CorrelationID,
		job.EnvClaimToken+"="+j.ClaimToken,
	)
	// Its own process group, so a stop reaches the handler's children too;
	// and killed with agentd, so a handler never outlives the agent that
	// holds its job (recovery would otherwise run it twice at once).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return Result{Err: fmt.Errorf("start %s: %w", e.Command[0], err)}
	}
	if t.Started != nil {
		t.Started(cmd.Process.Pid)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-waited:
	case <-ctx.Done():
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		grace := e.KillGrace
		if grace <= 0 {
			grace = 5 * time.Second
		}
		timer := time.NewTimer(grace)
		select {
		case werr = <-waited:
			timer.Stop()
		case <-timer.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			werr = <-waited
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // stragglers in the group
	}
	_ = stdout.Sync()
	_ = stderr.Sync()
	code := cmd.ProcessState.ExitCode()
	res := Result{ExitCode: &code}
	if werr != nil || code != 0 {
		msg := werr
		if msg == nil {
			msg = fmt.Errorf("exit status %d", code)
		}
		if ctx.Err() != nil {
			msg = fmt.Errorf("%v (stopped: %v)", msg, context.Cause(ctx))
		}
		if tail := readTail(stderr, stderrTail); tail != "" {
			res.Err = fmt.Errorf("%v: %s", msg, tail)
		} else {
			res.Err = msg
		}
	}
	return res
}

func readTail(f *os.File, n int64) string {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return ""
	}
	off := fi.Size() - n
	if off < 0 {
		off = 0
	}
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return ""
	}
	return string(trimSpace(buf))
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
