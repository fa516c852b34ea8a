// Package crawl_test runs crawls end to end with the real binaries
// (managerd with its frontier, agentd, watchdogd, farroctl) against the
// test site served by a separate process (test/crawl/siteserver), and
// checks them from the server's own access log.
package crawl_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/farro-dev/farro/internal/testbin"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/job"
)

// bins are the daemons, farroctl and the site server, built once per test run.
var bins = &testbin.Set{Prefix: "farro-crawl-bin-", Pkgs: []string{"./cmd/...", "./test/crawl/siteserver"}}

func binaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the daemons; skipped with -short")
	}
	return bins.Dir(t)
}

// proc is a process whose output goes to files in the test's directory.
type proc struct {
	name string
	args []string
	env  []string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startProc(t *testing.T, dir, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, args: args, env: env, dir: dir}
	p.start(t)
	t.Cleanup(p.kill)
	return p
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(p.dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(filepath.Join(p.dir, "logs", p.name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(p.args[0], p.args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.Env = append(os.Environ(), p.env...)
	if err := p.cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("start %s: %v", p.name, err)
	}
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		out.Close()
		close(done)
	}(p.cmd, p.done)
}

// kill SIGKILLs the process and waits for it.
func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *proc) stop(t *testing.T) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Errorf("%s did not stop within 20s of SIGTERM", p.name)
		p.kill()
	}
}

// site is the test site running in its own process.
type site struct {
	model   *testsite.Site
	logPath string
	resolve []string
	proc    *proc
}

func startSite(t *testing.T, bin, dir string, o testsite.Options, extra ...string) *site {
	t.Helper()
	logPath := filepath.Join(dir, "access.jsonl")
	args := append([]string{bin + "/siteserver", "--log", logPath}, extra...)
	cmd := exec.Command(args[0], args[1:]...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The server's timestamps are the measure of politeness: let it run
	// before the crawler's processes when the CPUs are busy (needs root or
	// CAP_SYS_NICE; without them the tolerance has to absorb more).
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, -15)
	p := &proc{name: "siteserver", cmd: cmd, done: make(chan struct{})}
	t.Cleanup(p.kill)
	sc := bufio.NewScanner(stdout)
	s := &site{logPath: logPath, proc: p}
	port := 0
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "port="); ok {
			port, _ = strconv.Atoi(v)
			continue
		}
		s.resolve = append(s.resolve, line)
		if len(s.resolve) == len(testsite.Model(o, 0).Hosts()) {
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	if port == 0 {
		t.Fatal("siteserver printed no port")
	}
	s.model = testsite.Model(o, port)
	return s
}

func (s *site) url(host, path string) string { return s.model.URL(host, path) }

// log reads the server's access log.
func (s *site) log(t *testing.T) []testsite.Request {
	t.Helper()
	b, err := os.ReadFile(s.logPath)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []testsite.Request
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r testsite.Request
		if err := json.Unmarshal(line, &r); err != nil {
			continue // a line being written
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// farro is a spool with its daemons.
type farro struct {
	t        *testing.T
	bin, dir string
	spool    string
	env      []string
	watchdog *proc
	manager  *proc
	agents   []*proc
}

func newFarro(t *testing.T, bin, dir string) *farro {
	spool := filepath.Join(dir, "spool")
	if _, err := job.Open(spool); err != nil {
		t.Fatal(err)
	}
	return &farro{t: t, bin: bin, dir: dir, spool: spool, env: []string{"FARRO_SPOOL=" + spool}}
}

func (f *farro) startWatchdog() {
	f.watchdog = startProc(f.t, f.dir, "watchdogd", f.env, f.bin+"/watchdogd", "--interval", "100ms")
}

func (f *farro) startManager() {
	f.manager = startProc(f.t, f.dir, "managerd", f.env, f.bin+"/managerd", "--backoff-base", "20ms", "--backoff-max", "200ms", "--rescan", "2s")
}

func (f *farro) startAgents(n, concurrency int) {
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("w%d", i)
		f.agents = append(f.agents, startProc(f.t, f.dir, "agent-"+id, f.env, f.bin+"/agentd", "--id", id,
			"--concurrency", strconv.Itoa(concurrency), "--heartbeat", "200ms", "--rescan", "2s"))
	}
}

// ctl runs farroctl; it fails the test on a non-zero exit unless ok
// accepts the code.
func (f *farro) ctl(args ...string) string {
	f.t.Helper()
	out, code := f.ctlCode(args...)
	if code != 0 {
		f.t.Fatalf("farroctl %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

func (f *farro) ctlCode(args ...string) (string, int) {
	f.t.Helper()
	cmd := exec.Command(f.bin+"/farroctl", append([]string{"--spool", f.spool}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		f.t.Fatal(err)
	}
	return stdout.String() + stderr.String(), code
}

func (f *farro) status(name string) *ctl.CrawlSummary {
	f.t.Helper()
	var s ctl.CrawlSummary
	out := f.ctl("crawl", "status", name, "--json")
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		f.t.Fatalf("crawl status --json: %v\n%s", err, out)
	}
	return &s
}

// state reads crawl.json directly (cheaper than farroctl for polling).
func (f *farro) state(name string) *crawl.Crawl {
	f.t.Helper()
	s := &job.Spool{Root: f.spool}
	st, err := crawl.Open(s, name)
	if err != nil {
		f.t.Fatal(err)
	}
	c, err := st.Load()
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *farro) waitState(name string, want crawl.State, timeout time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c := f.state(name)
		if c.State == want && (want != crawl.Cancelled || c.FinishedAt != nil) {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("crawl %s is %s (%s) after %s, want %s\n%s", name, c.State, c.StateReason, timeout, want, f.ctl("crawl", "status", name))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// crawlJobs counts the crawl's jobs per state.
func (f *farro) crawlJobs(name string) map[job.State]int {
	s := &job.Spool{Root: f.spool}
	out := map[job.State]int{}
	for _, st := range job.States {
		var dirs []string
		if st == job.InProgress {
			agents, _ := os.ReadDir(s.StateDir(st))
			for _, a := range agents {
				ds, _ := os.ReadDir(filepath.Join(s.StateDir(st), a.Name()))
				for _, d := range ds {
					dirs = append(dirs, d.Name())
				}
			}
		} else {
			ds, _ := os.ReadDir(s.StateDir(st))
			for _, d := range ds {
				dirs = append(dirs, d.Name())
			}
		}
		for _, d := range dirs {
			if _, n, ok := crawl.ParseJobID(d); ok && n == name {
				out[st]++
			}
		}
	}
	return out
}

func crawlArgs(s *site, name string, extra ...string) []string {
	args := []string{"crawl", "start", name, "--seed", s.url(testsite.HostA, "/"), "--allow-private", "--user-agent", testsite.UserAgent}
	for _, r := range s.resolve {
		args = append(args, "--resolve", r)
	}
	return append(args, extra...)
}

// pages is the access log without robots.txt requests.
func pages(log []testsite.Request) []testsite.Request {
	var out []testsite.Request
	for _, r := range log {
		if !testsite.IsRobots(r) {
			out = append(out, r)
		}
	}
	return out
}
