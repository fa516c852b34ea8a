package crash

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/farro-dev/farro/internal/testbin"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// The build tag that compiles the crash points into the binaries.
const crashTag = "farro_crashpoints"

var (
	crashBuildOnce sync.Once
	crashBinDir    string
	crashBuildErr  error
)

// crashBinaries builds the four binaries and the test handler once per
// test run with the crash points compiled in (-tags farro_crashpoints).
func crashBinaries(t testing.TB) string {
	t.Helper()
	crashBuildOnce.Do(func() {
		crashBinDir, crashBuildErr = buildInto("farro-crashbin-", "-tags", crashTag)
	})
	if crashBuildErr != nil {
		t.Fatal(crashBuildErr)
	}
	return crashBinDir
}

// buildInto builds ./cmd/... and the test handler into a new temp dir,
// which TestMain removes at the end of the run.
func buildInto(prefix string, flags ...string) (string, error) {
	dir, err := testbin.Build(prefix, flags, "./cmd/...", "./test/crash/testhandler")
	if err == nil {
		tempDirs.add(dir)
	}
	return dir, err
}

// tempDirs are removed by TestMain when the run ends.
var tempDirs = &dirList{}

type dirList struct {
	mu   sync.Mutex
	dirs []string
}

func (l *dirList) add(d string) {
	l.mu.Lock()
	l.dirs = append(l.dirs, d)
	l.mu.Unlock()
}

func (l *dirList) removeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.dirs {
		_ = os.RemoveAll(d)
	}
	l.dirs = nil
}

// The flags that make the daemons quick enough for many short scenarios
// while keeping every timeout far above scheduling noise: a live process
// is never declared silent (crash threshold 10 s against heartbeats every
// 100 ms) and a lock without owner file is given 2 s.
var (
	fastWatchdog = []string{"--interval", "50ms", "--lock-grace", "2s", "--crash-threshold", "10s", "--rescan", "1s"}
	fastManager  = []string{"--max-attempts", "3", "--backoff-base", "20ms", "--backoff-max", "100ms", "--tmp-max-age", "5s", "--rescan", "1s"}
	fastAgent    = []string{"--concurrency", "2", "--heartbeat", "100ms", "--rescan", "1s", "--kill-grace", "500ms", "--drain-timeout", "300ms"}
)

// restartDelay is systemd's default RestartSec.
const restartDelay = 100 * time.Millisecond

// cluster is one spool with its daemons, each supervised the way systemd's
// Restart=always would (restarted restartDelay after it exits, whatever the
// cause), plus the farroctl invocations of a scripted operator. It arms
// crash points: a process of a kind (agentd, managerd, watchdogd,
// farroctl) started while a point armed for its kind has not fired yet
// gets FARRO_CRASH_POINT; the point appends itself to the mark file just
// before it kills its process.
type cluster struct {
	t        testing.TB
	bin      string
	dir      string
	spoolDir string
	records  string
	spool    *job.Spool
	env      []string
	envD     []string // extra environment of the daemons only
	mark     string
	trace    string
	ledger   *ledger

	mu      sync.Mutex
	arms    map[string][]string // kind -> points, fired in this order
	daemons []*daemon
	deaths  []death
	kills   int // SIGKILLs: by the harness, and crash points firing
}

// death is one exit of a supervised daemon or a farroctl run.
type death struct {
	name, kind string
	pid        int
	at         time.Time
	killed     bool // by SIGKILL
}

func newCluster(t testing.TB, bin string) *cluster {
	t.Helper()
	return newClusterIn(t, bin, "")
}

// newClusterIn is newCluster with its directory under base ("": the
// system's temp dir).
func newClusterIn(t testing.TB, bin, base string) *cluster {
	t.Helper()
	// Not t.TempDir: a failed test keeps its spool, records and logs for
	// a post-mortem (FARRO_CRASH_KEEP=1 keeps every one).
	dir, err := os.MkdirTemp(base, "farro-crash-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("FARRO_CRASH_KEEP") == "1" {
			t.Logf("kept for inspection: %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	c := &cluster{
		t: t, bin: bin, dir: dir,
		spoolDir: filepath.Join(dir, "spool"), records: filepath.Join(dir, "records"),
		mark: filepath.Join(dir, "crash.mark"), trace: filepath.Join(dir, "crash.trace"),
		arms: map[string][]string{}, ledger: newLedger(),
	}
	for _, d := range []string{c.records, filepath.Join(dir, "logs"), filepath.Join(dir, "prompts")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if c.spool, err = job.Open(c.spoolDir); err != nil {
		t.Fatal(err)
	}
	c.env = []string{"FARRO_SPOOL=" + c.spoolDir, "CRASHTEST_RECORDS=" + c.records,
		"FARRO_CRASH_MARK=" + c.mark, "FARRO_CRASH_TRACE=" + c.trace, "FARRO_LOG_LEVEL=info"}
	if lvl := os.Getenv("FARRO_CRASH_LOG_LEVEL"); lvl != "" { // e.g. debug, for a post-mortem
		c.env = append(c.env, "FARRO_LOG_LEVEL="+lvl)
	}
	t.Cleanup(c.killAll)
	return c
}

// arm makes the next processes of kind fire point (after the points armed
// before it for that kind have fired).
func (c *cluster) arm(kind, point string) {
	c.mu.Lock()
	c.arms[kind] = append(c.arms[kind], point)
	c.mu.Unlock()
}

// fired returns the points that have fired so far, with how often.
func (c *cluster) fired() map[string]int {
	b, err := os.ReadFile(c.mark)
	out := map[string]int{}
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			out[f[0]]++
		}
	}
	return out
}

// armFor returns the crash env for a new process of kind: the first of
// its armed points that has not fired yet.
func (c *cluster) armFor(kind string) []string {
	c.mu.Lock()
	points := append([]string(nil), c.arms[kind]...)
	c.mu.Unlock()
	if len(points) == 0 {
		return nil
	}
	fired := c.fired()
	for _, p := range points {
		if fired[p] == 0 {
			return []string{"FARRO_CRASH_POINT=" + p}
		}
	}
	return nil
}

func (c *cluster) notFired() []string {
	fired := c.fired()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for kind, points := range c.arms {
		for _, p := range points {
			if fired[p] == 0 {
				out = append(out, kind+":"+p)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (c *cluster) noteDeath(d death) {
	c.mu.Lock()
	c.deaths = append(c.deaths, d)
	if d.killed {
		c.kills++
	}
	c.mu.Unlock()
}

// killCount is the number of SIGKILLs taken so far.
func (c *cluster) killCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kills
}

// daemon is one supervised daemon.
type daemon struct {
	c          *cluster
	name, kind string
	args       []string
	wrap       []string // a command that runs the daemon (e.g. in a namespace)
	extraEnv   []string
	log        *os.File
	errlog     *os.File

	mu       sync.Mutex
	cmd      *exec.Cmd
	started  time.Time
	stopping bool
	starts   int
	done     chan struct{} // closed when supervision ends
	exited   chan struct{} // closed when the current process has been reaped
}

// start starts and supervises a daemon: kind is agentd, managerd or
// watchdogd; name is unique within the cluster (e.g. a1 for agent a1).
func (c *cluster) start(name, kind string, args ...string) *daemon {
	c.t.Helper()
	return c.startWrapped(name, kind, nil, args...)
}

// startWrapped starts a daemon as the last argument of the wrap command:
// wrap... <binary> args....
func (c *cluster) startWrapped(name, kind string, wrap []string, args ...string) *daemon {
	c.t.Helper()
	d := &daemon{c: c, name: name, kind: kind, args: args, wrap: wrap, done: make(chan struct{})}
	var err error
	if d.log, err = os.OpenFile(filepath.Join(c.dir, "logs", name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
		c.t.Fatal(err)
	}
	if d.errlog, err = os.OpenFile(filepath.Join(c.dir, "logs", name+".stderr"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
		c.t.Fatal(err)
	}
	d.mu.Lock()
	err = d.spawn()
	d.mu.Unlock()
	if err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	c.mu.Lock()
	c.daemons = append(c.daemons, d)
	c.mu.Unlock()
	go d.supervise()
	return d
}

// startAgent starts agentd with id name and the fast flags.
func (c *cluster) startAgent(name string, extra ...string) *daemon {
	args := append([]string{"--id", name}, fastAgent...)
	args = append(args, extra...)
	args = append(args, "--exec", c.bin+"/testhandler")
	return c.start(name, "agentd", args...)
}

// spawn starts the process. The caller holds d.mu, so that stop (which
// sets stopping and signals under d.mu) either sees the new process or
// prevents it.
func (d *daemon) spawn() error {
	argv := append(append(append([]string(nil), d.wrap...), filepath.Join(d.c.bin, d.kind)), d.args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = d.log, d.errlog
	cmd.Env = append(append(append(append(os.Environ(), d.c.env...), d.c.envD...), d.extraEnv...), d.c.armFor(d.kind)...)
	if err := cmd.Start(); err != nil {
		return err
	}
	d.cmd, d.started, d.exited = cmd, time.Now(), make(chan struct{})
	d.starts++
	return nil
}

// supervise waits for the process and restarts it after restartDelay,
// until stop.
func (d *daemon) supervise() {
	defer close(d.done)
	for {
		d.mu.Lock()
		cmd, exited := d.cmd, d.exited
		d.mu.Unlock()
		_ = cmd.Wait()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		d.c.noteDeath(death{name: d.name, kind: d.kind, pid: cmd.Process.Pid, at: time.Now(),
			killed: ws.Signaled() && ws.Signal() == syscall.SIGKILL})
		close(exited)
		deadline := time.Now().Add(restartDelay)
		for time.Now().Before(deadline) {
			if d.isStopping() {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		d.mu.Lock()
		if d.stopping {
			d.mu.Unlock()
			return
		}
		err := d.spawn()
		d.mu.Unlock()
		if err != nil {
			d.c.t.Errorf("restart %s: %v", d.name, err)
			return
		}
	}
}

func (d *daemon) isStopping() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stopping
}

// signal sends sig to the current process, if it is running, and reports
// whether it did. SIGKILLs are counted (by the supervisor, when reaped).
func (d *daemon) signal(sig syscall.Signal) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.signalLocked(sig)
}

func (d *daemon) signalLocked(sig syscall.Signal) bool {
	select {
	case <-d.exited:
		return false
	default:
	}
	return d.cmd.Process.Signal(sig) == nil
}

// kill SIGKILLs the current process and waits until it is reaped; the
// supervisor restarts it.
func (d *daemon) kill() bool {
	d.mu.Lock()
	exited := d.exited
	d.mu.Unlock()
	if !d.signal(syscall.SIGKILL) {
		return false
	}
	<-exited
	return true
}

// stop ends supervision: SIGTERM (graceful drain), then SIGKILL after
// timeout. It waits until the process is reaped.
func (d *daemon) stop(timeout time.Duration) {
	d.mu.Lock()
	d.stopping = true
	d.signalLocked(syscall.SIGTERM)
	d.mu.Unlock()
	select {
	case <-d.done:
	case <-time.After(timeout):
		d.c.t.Errorf("%s did not stop within %s of SIGTERM", d.name, timeout)
		d.signal(syscall.SIGKILL)
		<-d.done
	}
}

// stopAll stops every daemon gracefully.
func (c *cluster) stopAll() {
	c.mu.Lock()
	ds := append([]*daemon(nil), c.daemons...)
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() { defer wg.Done(); d.stop(20 * time.Second) }()
	}
	wg.Wait()
}

// killAll SIGKILLs every daemon still supervised (test cleanup): nothing
// started by a test outlives it. Only the pids this cluster started are
// signalled.
func (c *cluster) killAll() {
	c.mu.Lock()
	ds := append([]*daemon(nil), c.daemons...)
	c.mu.Unlock()
	for _, d := range ds {
		d.mu.Lock()
		d.stopping = true
		d.signalLocked(syscall.SIGKILL)
		d.mu.Unlock()
	}
	for _, d := range ds {
		<-d.done
		d.log.Close()
		d.errlog.Close()
	}
	c.mu.Lock()
	c.daemons = nil
	c.mu.Unlock()
}

// daemon returns the supervised daemon called name, or nil.
func (c *cluster) daemon(name string) *daemon {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.daemons {
		if d.name == name {
			return d
		}
	}
	return nil
}

// ctlResult is one farroctl run.
type ctlResult struct {
	stdout, stderr string
	code           int
	crashed        bool // SIGKILLed (by its crash point)
}

// ctlOnce runs farroctl once (armed like any process of kind farroctl).
func (c *cluster) ctlOnce(args ...string) ctlResult {
	cmd := exec.Command(filepath.Join(c.bin, "farroctl"), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(append(os.Environ(), c.env...), c.armFor("farroctl")...)
	err := cmd.Run()
	r := ctlResult{stdout: strings.TrimSpace(out.String()), stderr: strings.TrimSpace(errb.String())}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			r.crashed = true
			c.noteDeath(death{name: "farroctl", kind: "farroctl", pid: cmd.Process.Pid, at: time.Now(), killed: true})
		}
	default:
		r.code = -1
		r.stderr += " " + err.Error()
	}
	return r
}

// ctl runs farroctl like an operator would: a run that was killed is
// simply run again.
func (c *cluster) ctl(args ...string) ctlResult {
	for {
		if r := c.ctlOnce(args...); !r.crashed {
			return r
		}
	}
}

// submit submits job id through farroctl with prompt and flags, and keeps
// the ledger: the job is attempted before the first run and acknowledged
// once farroctl printed its ID. A run killed before it answered is
// repeated with the same ID; "exists" then means an earlier run got
// through (the job is found in the spool) or that its lock still belongs
// to the killed run (retried until watchdogd has removed it).
func (c *cluster) submit(id, prompt string, flags ...string) {
	c.t.Helper()
	c.ledger.attempt(id)
	pf := filepath.Join(c.dir, "prompts", id+".json")
	if err := os.WriteFile(pf, []byte(prompt), 0o644); err != nil {
		c.t.Fatal(err)
	}
	args := append(append([]string{"submit", "--id", id}, flags...), pf)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		r := c.ctl(args...)
		if r.code == 0 && r.stdout == id {
			c.ledger.ack(id)
			return
		}
		if r.code != 0 && strings.Contains(r.stderr, "exists") {
			if _, err := c.spool.Locate(id); err == nil {
				c.ledger.ack(id)
				return
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		// Anything else (e.g. a disk hiccup) is reported by farroctl and
		// the operator tries again.
		c.t.Logf("submit %s: exit %d: %s %s (retrying)", id, r.code, r.stdout, r.stderr)
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Errorf("submit %s: not accepted within 60s", id)
}

// where returns the states job id is found in (several: a duplicate).
func (c *cluster) where(id string) []job.Location {
	locs, _ := c.spool.Locate(id)
	return locs
}

// state returns the single state of job id, or "" when it is not found
// exactly once (in flight between two places it is found once anyway:
// renames are atomic).
func (c *cluster) state(id string) (job.State, string) {
	locs := c.where(id)
	if len(locs) != 1 {
		return "", ""
	}
	return locs[0].State, locs[0].Agent
}

// starts counts the handler executions of job id begun so far.
func (c *cluster) starts(id string) int {
	f, err := os.Open(filepath.Join(c.records, id+".jsonl"))
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), []byte(`"event":"start"`)) {
			n++
		}
	}
	return n
}

// waitUntil polls cond every 20ms until it holds (true) or timeout passes
// (false).
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quiet reports whether the cluster has nothing left to do: every armed
// point fired, every job found once and terminal (or gone, if expired),
// no lock, nothing in tmp/.
func (c *cluster) quiet(points bool) (bool, string) {
	if nf := c.notFired(); points && len(nf) > 0 {
		return false, "points not fired yet: " + strings.Join(nf, ", ")
	}
	cen := takeCensusQuiet(c.spool)
	if len(cen.locks) > 0 {
		return false, fmt.Sprintf("locks %v", cen.locks)
	}
	if len(cen.tmp) > 0 {
		return false, fmt.Sprintf("tmp/ %v", cen.tmp)
	}
	// An interrupted quarantine note's temp file: managerd sweeps it.
	corrupt, _ := os.ReadDir(c.spool.Path(job.CorruptDir))
	for _, e := range corrupt {
		if strings.HasPrefix(e.Name(), ".") {
			return false, "corrupt/" + e.Name()
		}
	}
	for id, sts := range cen.where {
		if len(sts) != 1 || !sts[0].Terminal() {
			return false, fmt.Sprintf("job %s in %v", id, sts)
		}
		if c.ledger.isExpired(id) {
			return false, fmt.Sprintf("job %s not expired yet", id)
		}
	}
	for _, id := range c.ledger.acked() {
		if _, ok := cen.where[id]; !ok && !c.ledger.isExpired(id) {
			return false, fmt.Sprintf("acknowledged job %s not found", id)
		}
	}
	return true, ""
}

// waitQuiet waits until the cluster is quiet twice in a row, 300ms apart
// (and, with points, every armed crash point has fired).
func (c *cluster) waitQuiet(timeout time.Duration, points bool) bool {
	c.t.Helper()
	var why string
	ok := waitUntil(timeout, func() bool {
		var q bool
		if q, why = c.quiet(points); !q {
			return false
		}
		time.Sleep(300 * time.Millisecond)
		q, why = c.quiet(points)
		return q
	})
	if !ok {
		c.t.Errorf("not quiet after %s: %s", timeout, why)
	}
	return ok
}

// takeCensusQuiet is takeCensus without a testing.T: errors read as
// "nothing there", so it can be polled from any goroutine.
func takeCensusQuiet(s *job.Spool) census {
	c := census{where: map[string][]job.State{}}
	for _, st := range job.States {
		var dirs []string
		if st == job.InProgress {
			agents, _ := os.ReadDir(s.StateDir(st))
			for _, a := range agents {
				if a.IsDir() {
					ents, _ := os.ReadDir(s.AgentDir(a.Name()))
					for _, e := range ents {
						dirs = append(dirs, e.Name())
					}
				}
			}
		} else {
			ents, _ := os.ReadDir(s.StateDir(st))
			for _, e := range ents {
				dirs = append(dirs, e.Name())
			}
		}
		for _, name := range dirs {
			switch {
			case strings.HasPrefix(name, "."):
			case strings.HasSuffix(name, job.LockSuffix):
				c.locks = append(c.locks, name)
			default:
				c.where[name] = append(c.where[name], st)
			}
		}
	}
	tmp, _ := os.ReadDir(s.Path(job.TmpDir))
	for _, e := range tmp {
		c.tmp = append(c.tmp, e.Name())
	}
	return c
}

// logged reports whether the stdout log of daemon name has a line
// containing s.
func (c *cluster) logged(name, s string) bool {
	b, err := os.ReadFile(filepath.Join(c.dir, "logs", name+".log"))
	return err == nil && bytes.Contains(b, []byte(s))
}

// explainOverlaps logs, for every job whose executions overlapped, each
// execution with its agent's pid and, if the harness saw that agent die,
// when: to tell a handler that outlived its killed agent from two live
// owners.
func (c *cluster) explainOverlaps(t testing.TB) {
	c.mu.Lock()
	died := map[int]time.Time{}
	for _, d := range c.deaths {
		died[d.pid] = d.at
	}
	c.mu.Unlock()
	ents, _ := os.ReadDir(c.records)
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok {
			continue
		}
		execs, err := loadExecutions(c.records, id)
		over := overlappedRuns(execs)
		if err != nil || len(over) == 0 {
			continue
		}
		overlapped := map[int]bool{}
		for _, i := range over {
			overlapped[i] = true
		}
		for i, x := range execs {
			line := fmt.Sprintf("%s execution %d: pid %d attempt %d agent pid %d start %s", id, i+1, x.pid, x.attempt, x.ppid,
				time.Unix(0, x.start).Format("15:04:05.000000"))
			if x.end != 0 {
				line += " end " + time.Unix(0, x.end).Format("15:04:05.000000")
			}
			if at, ok := died[x.ppid]; ok {
				line += " agent reaped " + at.Format("15:04:05.000000")
			}
			if x.signal != "" {
				line += " (on SIG" + x.signal + ")"
			}
			if overlapped[i] {
				line += " OVERLAP"
			}
			t.Log(line)
		}
	}
}
