// Package pg runs farro's real binaries on a private PostgreSQL: agents
// standing in for several hosts (separate local directories, distinct
// agent ids) share one queue with one watchdogd and one managerd.
// Without PostgreSQL's server binaries the tests fail (testpg), never
// skip.
package pg

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/internal/testbin"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

var bins = &testbin.Set{Prefix: "farro-pg-bin-", Pkgs: []string{"./cmd/agentd", "./cmd/managerd", "./cmd/watchdogd", "./cmd/farroctl"}}

func TestMain(m *testing.M) {
	code := m.Run()
	bins.Remove()
	testpg.Stop()
	os.Exit(code)
}

// daemon is a farro process whose stdout and stderr go to a log file.
type daemon struct {
	cmd *exec.Cmd
	log string
}

func start(t *testing.T, dir, logName, name string, args ...string) *daemon {
	t.Helper()
	d := &daemon{log: filepath.Join(dir, logName+".log")}
	f, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d.cmd = exec.Command(filepath.Join(bins.Dir(t), name), args...)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	d.cmd.Env = append(os.Environ(), "FARRO_STORE=", "FARRO_SPOOL=")
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.stop(syscall.SIGKILL) })
	return d
}

func (d *daemon) stop(sig syscall.Signal) {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(sig)
	_ = d.cmd.Wait()
}

// Two agents on two "hosts" share one queue of 200 jobs; one of them is
// SIGKILLed mid-run and restarted. Every job succeeds; no execution of a
// job overlaps another of the same job; the jobs whose first attempt
// fails are retried by managerd.
func TestTwoHostsShareOneQueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := testpg.NewDatabase(t, testpg.Start(t))
	dir := t.TempDir()

	out, err := exec.Command(filepath.Join(bins.Dir(t), "farroctl"), "migrate", "--store", url).CombinedOutput()
	if err != nil {
		t.Fatalf("farroctl migrate: %v\n%s", err, out)
	}

	locks, runs := filepath.Join(dir, "locks"), filepath.Join(dir, "runs")
	if err := os.Mkdir(locks, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "handler.sh")
	if err := os.WriteFile(script, []byte(stormHandler), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LOCKS", locks)
	t.Setenv("RUNS", runs)
	t.Setenv("SLEEP", "0.05")

	st, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 200
	var reqs []job.SubmitRequest
	for i := range n {
		id := fmt.Sprintf("job-%03d", i)
		prompt := `{"n":` + fmt.Sprint(i) + `}`
		if i%40 == 7 {
			prompt = `{"fail":true}`
		}
		reqs = append(reqs, job.SubmitRequest{ID: id, Kind: "exec", Prompt: []byte(prompt), Actor: "test"})
	}
	if _, errs := st.Submit(ctx, reqs); errs != nil {
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	host := func(i int) string {
		d := filepath.Join(dir, fmt.Sprintf("host%d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	h1, h2 := host(1), host(2)
	common := []string{"--store", url, "--log-level", "debug"}
	agent := func(id, local string) *daemon {
		return start(t, dir, "agentd-"+id, "agentd", append(common, "--spool", local, "--id", id, "--concurrency", "4",
			"--heartbeat", "200ms", "--lease", "2s", "--drain-timeout", "5s", "--exec", script)...)
	}
	wd := start(t, dir, "watchdogd", "watchdogd", append(common, "--spool", h1, "--interval", "200ms", "--lease-grace", "1s")...)
	md := start(t, dir, "managerd", "managerd", append(common, "--spool", h1, "--backoff-base", "100ms", "--backoff-max", "200ms", "--max-attempts", "5")...)
	a1 := agent("w1", h1)
	a2 := agent("w2", h2)

	succeeded := func() int {
		c, err := st.Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c[job.Succeeded]
	}
	deadline := time.Now().Add(25 * time.Second)
	for succeeded() < 40 {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 40 jobs succeeded in time; see %s", dir)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Kill w1 mid-run: once one of its handlers has been running a
	// little and not long enough to end (it sleeps 50ms), by the
	// handlers' own start and end lines (a claim's started_at is not
	// enough: a job claimed ahead of its turn has not started yet).
	for !midRun(t, runs, "w1", 5*time.Millisecond, 30*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("w1 never held a running job; see %s", dir)
		}
		time.Sleep(2 * time.Millisecond)
	}
	a1.stop(syscall.SIGKILL) // its handlers die with it, its claims wait for their lease
	a1 = agent("w1", h1)
	for succeeded() < n {
		if time.Now().After(deadline) {
			c, _ := st.Counts(ctx)
			t.Fatalf("not every job succeeded within the deadline: %v; logs in %s", c, dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, d := range []*daemon{a1, a2, md, wd} {
		d.stop(syscall.SIGTERM)
	}

	// Every job succeeded once, by a claim whose handler ran to its end;
	// no two executions of a job overlapped.
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		ids[i] = r.ID
	}
	rep, err := check(ctx, st, runs, ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.zero() {
		t.Errorf("checker: %s; first problems:\n%s\nlogs in %s", rep.counts(), strings.Join(rep.problems, "\n"), dir)
	}
	// The jobs failing on purpose failed their first attempt and
	// managerd retried them; the kill of an agent mid-run made more jobs
	// run again.
	if rep.retried == 0 {
		t.Error("no job failed on purpose and was retried")
	}
	if rep.reruns <= rep.retried {
		t.Errorf("%d reruns, %d of them retries: no job ran again after the agent was killed: the kill did not land mid-run", rep.reruns, rep.retried)
	}
	t.Logf("%d executions, %d reruns (%d retries of a failure)", rep.executions, rep.reruns, rep.retried)

	// Every daemon line is one JSON object with no key twice; the
	// watchdog recovered the killed agent's claims by their lease.
	for _, name := range []string{"agentd-w1", "agentd-w2", "managerd", "watchdogd"} {
		b, err := os.ReadFile(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		if _, problems := logxtest.Scan(b); len(problems) > 0 {
			t.Errorf("%s.log: %v", name, problems)
		}
		if name == "watchdogd" && !strings.Contains(string(b), `"verdict":"lease-expired"`) {
			t.Errorf("watchdogd recovered no claim by its lease:\n%s", b)
		}
		if name == "managerd" && !strings.Contains(string(b), "--frontier=false implied") {
			t.Errorf("managerd did not say the frontier is off")
		}
	}
}

// midRun says whether the runs file has a handler of agent that started
// between min and max ago and has not ended.
func midRun(t *testing.T, runs, agent string, min, max time.Duration) bool {
	t.Helper()
	b, err := os.ReadFile(runs)
	if err != nil {
		if os.IsNotExist(err) {
			return false
		}
		t.Fatal(err)
	}
	started := map[string]int64{} // job and token -> start (ns)
	for _, l := range strings.Split(string(b), "\n") {
		w := strings.Fields(l)
		switch {
		case len(w) == 6 && w[0] == "start" && w[4] == agent:
			if ns, err := strconv.ParseInt(w[5], 10, 64); err == nil {
				started[w[1]+" "+w[2]] = ns
			}
		case len(w) == 3 && w[0] == "end":
			delete(started, w[1]+" "+w[2])
		}
	}
	now := time.Now().UnixNano()
	for _, ns := range started {
		if age := time.Duration(now - ns); age > min && age < max {
			return true
		}
	}
	return false
}
