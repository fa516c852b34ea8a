package crash

import (
	"bufio"
	"bytes"
	"encoding/json"
	"github.com/farro-dev/farro/internal/testbin"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// bins are the four daemons and the test handler, built once per test run.
var bins = &testbin.Set{Prefix: "farro-bin-", Pkgs: []string{"./cmd/...", "./test/crash/testhandler"}}

func binaries(t *testing.T) string {
	t.Helper()
	return bins.Dir(t)
}

// daemonProc is one running daemon whose stdout goes to a log file.
type daemonProc struct {
	name string
	args []string
	env  []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startDaemon(t *testing.T, dir, name string, env []string, args ...string) *daemonProc {
	t.Helper()
	d := &daemonProc{name: name, args: args, env: env, log: filepath.Join(dir, "logs", name+".log")}
	if err := os.MkdirAll(filepath.Dir(d.log), 0o755); err != nil {
		t.Fatal(err)
	}
	d.start(t)
	t.Cleanup(func() { d.kill() })
	return d
}

func (d *daemonProc) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(d.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := os.OpenFile(strings.TrimSuffix(d.log, ".log")+".stderr", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	bin := d.args[0]
	d.cmd = exec.Command(bin, d.args[1:]...)
	d.cmd.Stdout = f
	d.cmd.Stderr = ef
	d.cmd.Env = append(os.Environ(), d.env...)
	if err := d.cmd.Start(); err != nil {
		f.Close()
		ef.Close()
		t.Fatalf("start %s: %v", d.name, err)
	}
	d.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		f.Close()
		ef.Close()
		close(done)
	}(d.cmd, d.done)
}

// kill sends SIGKILL and waits for the process to be reaped.
func (d *daemonProc) kill() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Kill()
	<-d.done
}

// stop sends SIGTERM and waits up to timeout for a graceful exit.
func (d *daemonProc) stop(t *testing.T, timeout time.Duration) {
	t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(timeout):
		t.Errorf("%s did not stop within %s of SIGTERM", d.name, timeout)
		d.kill()
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// spoolCensus maps every job id found in a state directory to its
// locations, and reports leftovers (locks, tmp entries, corrupt entries).
type census struct {
	where   map[string][]job.State
	locks   []string
	tmp     []string
	corrupt []string
}

func takeCensus(t *testing.T, s *job.Spool) census {
	t.Helper()
	c := census{where: map[string][]job.State{}}
	for _, st := range job.States {
		var dirs []string
		if st == job.InProgress {
			agents, err := fsq.ScanDir(s.StateDir(st))
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range agents.Dirs {
				e, err := fsq.ScanDir(s.AgentDir(a))
				if err != nil {
					t.Fatal(err)
				}
				dirs = append(dirs, e.Dirs...)
			}
		} else {
			e, err := fsq.ScanDir(s.StateDir(st))
			if err != nil {
				t.Fatal(err)
			}
			dirs = e.Dirs
		}
		for _, name := range dirs {
			if strings.HasSuffix(name, job.LockSuffix) {
				c.locks = append(c.locks, name)
				continue
			}
			c.where[name] = append(c.where[name], st)
		}
	}
	for _, d := range []string{job.TmpDir, job.CorruptDir} {
		ents, err := os.ReadDir(s.Path(d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if d == job.TmpDir {
				c.tmp = append(c.tmp, e.Name())
			} else {
				c.corrupt = append(c.corrupt, e.Name())
			}
		}
	}
	return c
}

// execution is one handler run of a job, from the handler's own records.
type execution struct {
	start, end int64 // end 0: killed before it could record one
	attempt    int
}

func readExecutions(t *testing.T, dir, id string) []execution {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, id+".jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	open := map[int]*execution{}
	var out []execution
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			Event   string `json:"event"`
			NS      int64  `json:"ns"`
			PID     int    `json:"pid"`
			Attempt int    `json:"attempt"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record of %s: %v", id, err)
		}
		switch r.Event {
		case "start":
			open[r.PID] = &execution{start: r.NS, attempt: r.Attempt}
		case "end":
			if e := open[r.PID]; e != nil {
				e.end = r.NS
				out = append(out, *e)
				delete(open, r.PID)
			}
		}
	}
	for _, e := range open {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// checkLogLines verifies that every line of a daemon log is a JSON object
// with the seed 002 section 7.2 fields, and that transition lines carry
// job_id, correlation_id (when the job has one) and event{type,from,to}.
// It returns the number of transition lines.
func checkLogLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n, transitions := 0, 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			// A SIGKILLed daemon's last write can be cut short (a
			// write(2) to a file stops between pages when a fatal
			// signal is pending), and the restarted daemon appends its
			// first line right after it. Only that is forgiven: the rest
			// of the line must be a whole line of its own.
			i := bytes.LastIndex(line, []byte(`{"level":`))
			if i <= 0 || json.Unmarshal(line[i:], &m) != nil {
				t.Errorf("%s line %d is not JSON: %q", filepath.Base(path), n, sc.Text())
				continue
			}
			t.Logf("%s line %d: a killed daemon's torn last line, then a whole one", filepath.Base(path), n)
		}
		for _, k := range []string{"timestamp", "level", "message", "app", "actor"} {
			if _, ok := m[k]; !ok {
				t.Errorf("%s line %d lacks %q: %s", filepath.Base(path), n, k, sc.Text())
			}
		}
		if ts, _ := m["timestamp"].(string); ts != "" {
			if _, err := time.Parse("2006-01-02T15:04:05.000Z07:00", ts); err != nil {
				t.Errorf("%s line %d: timestamp %q lacks milliseconds: %v", filepath.Base(path), n, ts, err)
			}
		}
		if ev, ok := m["event"].(map[string]any); ok {
			transitions++
			for _, k := range []string{"type", "from", "to"} {
				if _, ok := ev[k]; !ok {
					t.Errorf("%s line %d: event lacks %q", filepath.Base(path), n, k)
				}
			}
			if _, ok := m["job_id"]; !ok {
				t.Errorf("%s line %d: transition without job_id", filepath.Base(path), n)
			}
			if ev["from"] == "queued" && ev["to"] == "in-progress" {
				if _, ok := m["correlation_id"]; !ok {
					t.Errorf("%s line %d: claim without correlation_id", filepath.Base(path), n)
				}
			}
		}
	}
	return transitions
}
