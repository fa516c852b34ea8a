package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	// OutputDropped counts the bytes of output dropped past the cap
	// (Exec.OutputMax); recorded as job.json's output_dropped.
	OutputDropped int64
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

// ErrHandlerUnusable is wrapped in a Result's Err when a handler could not
// start its work at all (its program is missing, not executable, has a
// missing interpreter, ...), as opposed to work that ran and failed. The
// agent releases such a job back to queued without counting an attempt
// and stops claiming that kind until the handler is usable again. Check
// errors wrap it too.
var ErrHandlerUnusable = errors.New("handler unusable")

// Checker is implemented by handlers that can tell, without running a
// job, whether they are usable. New refuses a handler whose Check fails;
// during an outage the agent calls Check to know when to resume.
type Checker interface {
	Check() error
}

// Exec runs a fixed command for each job (never a shell built from job
// data): prompt.json on stdin, FARRO_JOB_ID, FARRO_JOB_DIR, FARRO_ATTEMPT
// and FARRO_CORRELATION_ID in the environment, stdout and stderr captured
// into the job directory, one pair of files per attempt
// (stdout.<N>.log, stderr.<N>.log: earlier attempts' output is kept), at
// most OutputMax bytes of the two together (0: no limit; past it the rest
// is read and dropped, and a note line says how much). Exit 0 means
// succeeded. When ctx ends (timeout,
// cancel, drain) the whole process group gets SIGTERM, then SIGKILL after
// KillGrace.
//
// Command[0] is resolved like exec.LookPath does (a bare name through
// $PATH, anything with a slash as a path), and a relative path against
// agentd's working directory, not the job directory the handler runs in.
type Exec struct {
	Command   []string
	KillGrace time.Duration
	OutputMax int64 // bytes per attempt, stdout and stderr together; 0: no limit
}

// stderrTail bounds the error text kept in job.json.
const stderrTail = 2048

// Run implements Handler.
func (e *Exec) Run(ctx context.Context, t Task) Result {
	path, err := e.resolve()
	if err != nil {
		return Result{Err: fmt.Errorf("cannot start the handler: %w", err)}
	}
	dir, j := t.Env.Runtime.Dir, t.Env.Lifecycle
	out, err := openOutput(dir, j.Attempts, e.OutputMax)
	if err != nil {
		return Result{Err: err}
	}
	defer out.close()
	stderr := out.files[1]
	prompt, err := os.Open(filepath.Join(dir, job.PromptFile))
	if err != nil {
		return Result{Err: fmt.Errorf("prompt: %w", err)}
	}
	defer prompt.Close()

	cmd := exec.Command(path, e.Command[1:]...)
	cmd.Args[0] = e.Command[0] // the name as configured, for the handler's argv[0]
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = prompt, out.stdout(), out.stderr()
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
	err = cmd.Start()
	out.started(err == nil)
	if err != nil {
		if notStartable(err) {
			// The program could not be started at all: not the job's fault.
			return Result{Err: fmt.Errorf("%w: start %s: %w", ErrHandlerUnusable, e.Command[0], err)}
		}
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
	dropped := out.finish()
	code := cmd.ProcessState.ExitCode()
	res := Result{ExitCode: &code, OutputDropped: dropped}
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

// Check implements Checker: the program exists, is a regular file that
// this process may execute, and a script's interpreter (#!) does too.
func (e *Exec) Check() error {
	_, err := e.resolve()
	return err
}

// resolve returns the absolute path of the program, or an error wrapping
// ErrHandlerUnusable that says why it cannot be run.
func (e *Exec) resolve() (string, error) {
	if len(e.Command) == 0 || e.Command[0] == "" {
		return "", unusableError("no command configured for exec jobs (agentd --exec CMD or FARRO_EXEC)")
	}
	name := e.Command[0]
	path, err := lookExecutable(name)
	if err != nil {
		return "", unusableError(fmt.Sprintf("%q: %s", name, explain(name, err)))
	}
	if interp := interpreter(path); interp != "" {
		if _, err := lookExecutable(interp); err != nil {
			return "", unusableError(fmt.Sprintf("%q: its interpreter %s: %s", name, interp, explain(interp, err)))
		}
	}
	return path, nil
}

// unusableError is resolve's error: the reason alone, matching
// ErrHandlerUnusable.
type unusableError string

func (e unusableError) Error() string        { return string(e) }
func (e unusableError) Is(target error) bool { return target == ErrHandlerUnusable }

// lookExecutable is exec.LookPath (which checks execute permission for
// this process's effective ids) made absolute.
func lookExecutable(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	return filepath.Abs(path)
}

// explain turns a lookup error into a short reason, with a hint where a
// systemd sandbox is the likely cause.
func explain(name string, err error) string {
	var reason string
	switch {
	case errors.Is(err, exec.ErrNotFound):
		reason = "not found in $PATH"
	case errors.Is(err, exec.ErrDot):
		reason = "found only relative to the current directory in $PATH (give a path)"
	case errors.Is(err, fs.ErrNotExist):
		reason = "no such file"
	case errors.Is(err, fs.ErrPermission):
		reason = fmt.Sprintf("not executable by this process (uid %d)", os.Geteuid())
	case errors.Is(err, syscall.EISDIR):
		reason = "is a directory"
	default:
		reason = err.Error()
	}
	if !errors.Is(err, exec.ErrNotFound) {
		for _, hidden := range []string{"/home/", "/root/", "/run/user/"} {
			if strings.HasPrefix(name, hidden) {
				reason += " (under systemd, ProtectHome=yes hides " + strings.TrimSuffix(hidden, "/") + ": install the handler elsewhere, e.g. /usr/local/bin)"
				break
			}
		}
	}
	return reason
}

// interpreter returns the program named on a script's #! line, or "".
func interpreter(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "" // execute-only: not a script the kernel could read either way
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := io.ReadFull(f, buf)
	line, ok := strings.CutPrefix(string(buf[:n]), "#!")
	if !ok {
		return ""
	}
	line, _, _ = strings.Cut(line, "\n")
	if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "/") {
		return f[0]
	}
	return ""
}

// notStartable tells a start that failed because of the program (missing,
// not executable, bad format, being written) from other failures.
func notStartable(err error) bool {
	if errors.Is(err, exec.ErrNotFound) {
		return true
	}
	for _, e := range []syscall.Errno{syscall.ENOENT, syscall.ENOTDIR, syscall.EACCES, syscall.EPERM, syscall.ENOEXEC, syscall.ETXTBSY, syscall.ELOOP, syscall.EISDIR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
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
