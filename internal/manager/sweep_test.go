package manager

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// stalledSubmitEnv makes the test binary a submitter that stalls
// (runStalledSubmit): "<spool root>|<id>,<id>...".
const stalledSubmitEnv = "FARRO_TEST_STALLED_SUBMIT"

// runStalledSubmit is the child process of the tests below: it submits
// the jobs named in spec in one SubmitMany and stalls in its first
// barrier, where a slow disk's sync stalls a real submit, with its builds
// in tmp/. It says "building" and waits there until its stdin is closed,
// then says "submitted" and exits 0 if every job was submitted.
func runStalledSubmit(spec string) {
	root, ids, _ := strings.Cut(spec, "|")
	s, err := job.Open(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var once sync.Once
	fsq.SetObserver(func(op fsq.Op, _, _ string) {
		if op == fsq.OpBarrier {
			once.Do(func() {
				os.Stdout.WriteString("building\n")
				_, _ = io.Copy(io.Discard, os.Stdin)
			})
		}
	})
	var reqs []job.SubmitRequest
	for _, id := range strings.Split(ids, ",") {
		reqs = append(reqs, job.SubmitRequest{ID: id, Kind: "noop", Prompt: []byte(`{}`)})
	}
	_, errs := s.SubmitMany(reqs)
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Stdout.WriteString("submitted\n")
	os.Exit(0)
}

// stalledSubmit is a running runStalledSubmit.
type stalledSubmit struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // its stdout, closed at EOF
	stderr bytes.Buffer
}

// startStalledSubmit starts a submitter of ids on e's spool and returns
// once its builds are in tmp/ and it is stalled, stopped by SIGSTOP (a
// frozen process: alive, doing nothing).
func startStalledSubmit(t *testing.T, e *env, ids ...string) *stalledSubmit {
	t.Helper()
	p := &stalledSubmit{lines: make(chan string, 4)}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), stalledSubmitEnv+"="+e.s.Root+"|"+strings.Join(ids, ","))
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait() // closes out: the reader below ends
	})
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	p.expect(t, "building")
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var info unix.Siginfo // wait until it is stopped, leaving the state for Wait
	if err := unix.Waitid(unix.P_PID, p.cmd.Process.Pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil); err != nil {
		t.Fatalf("waitid: %v", err)
	}
	return p
}

// expect waits for the child's next line and checks it is want.
func (p *stalledSubmit) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case got, ok := <-p.lines:
		if !ok || got != want {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
			t.Fatalf("submitter said %q (open %v), want %q; stderr: %s", got, ok, want, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("submitter did not say %q within 30s", want)
	}
}

// ageTmp makes every entry of tmp/ two hours old, past a TmpMaxAge of
// an hour, and returns their names.
func ageTmp(t *testing.T, e *env) []string {
	t.Helper()
	old := time.Now().Add(-2 * time.Hour)
	names := ls(t, e.s.Path(job.TmpDir))
	for _, n := range names {
		if err := os.Chtimes(e.s.Path(job.TmpDir, n), old, old); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// A submitter frozen (SIGSTOP) with its builds in tmp/ for longer than
// TmpMaxAge is alive: the sweep leaves its builds alone, and once it runs
// again its submit completes. (Before the builds were flocked, the sweep
// removed them and the submit failed with ENOENT on its rename.)
func TestTmpSweepKeepsTheBuildsOfALiveSubmit(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{TmpMaxAge: time.Hour})
	p := startStalledSubmit(t, e, "live-a", "live-b")
	builds := ageTmp(t, e)
	if len(builds) != 2 {
		t.Fatalf("tmp/ holds %v, want the two builds", builds)
	}
	e.runOnce(t)
	if got := ls(t, e.s.Path(job.TmpDir)); !equal(got, builds) {
		t.Fatalf("after the sweep tmp/ holds %v, want the live builds %v", got, builds)
	}
	if !strings.Contains(e.log.String(), "a live submit is building it") {
		t.Errorf("no log line says why the builds were kept:\n%s", e.log.String())
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	p.stdin.Close() // past its barrier
	p.expect(t, "submitted")
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("submitter: %v; stderr: %s", err, p.stderr.String())
	}
	for _, id := range []string{"live-a", "live-b"} {
		if st, _ := e.where(t, id); st != job.Queued {
			t.Errorf("job %s is %s, want queued", id, st)
		}
	}
	if got := ls(t, e.s.Path(job.TmpDir)); len(got) != 0 {
		t.Errorf("tmp/ holds %v after the submit", got)
	}
}

// The same builds once their submitter was SIGKILLed: nobody holds their
// flock any more, and the sweep removes them by their age, as before.
func TestTmpSweepRemovesTheBuildsOfADeadSubmit(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{TmpMaxAge: time.Hour})
	p := startStalledSubmit(t, e, "dead-a", "dead-b")
	builds := ageTmp(t, e)
	e.runOnce(t)
	if got := ls(t, e.s.Path(job.TmpDir)); !equal(got, builds) {
		t.Fatalf("while its submitter lives tmp/ holds %v, want %v", got, builds)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err == nil {
		t.Fatal("the killed submitter exited 0")
	}
	e.runOnce(t)
	if got := ls(t, e.s.Path(job.TmpDir)); len(got) != 0 {
		t.Fatalf("tmp/ holds %v after its submitter died, want nothing", got)
	}
	for _, id := range []string{"dead-a", "dead-b"} {
		if _, err := e.s.Locate(id); !errors.Is(err, job.ErrNotFound) {
			t.Errorf("job %s: Locate = %v, want ErrNotFound", id, err)
		}
	}
	if !strings.Contains(e.log.String(), "swept tmp leftover") {
		t.Errorf("no log line for the sweep:\n%s", e.log.String())
	}
}
