// Package pg runs farro's real binaries on a private PostgreSQL: agents
// standing in for several hosts (separate local directories, distinct
// agent ids) share one queue with one watchdogd and one managerd.
// Without PostgreSQL's server binaries the tests fail (testpg), never
// skip.
package pg

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// The handler: appends "start ID TOKEN ATTEMPT" and "end ID TOKEN" to a
// file all the agents share; it holds an exclusive flock on a file of
// the job's while it runs (released by the kernel when it dies), and
// writes "overlap ID TOKEN" if another execution of the same job holds
// it. A prompt with "fail" fails its first attempt.
const handlerScript = `#!/bin/sh
prompt=$(cat)
exec 9>"$LOCKS/$FARRO_JOB_ID"
if ! flock -n 9; then echo "overlap $FARRO_JOB_ID $FARRO_CLAIM_TOKEN" >> "$RUNS"; exit 0; fi
echo "start $FARRO_JOB_ID $FARRO_CLAIM_TOKEN $FARRO_ATTEMPT" >> "$RUNS"
sleep 0.05 9>&-
case "$prompt" in *fail*) if [ "$FARRO_ATTEMPT" = 1 ]; then echo "end $FARRO_JOB_ID $FARRO_CLAIM_TOKEN" >> "$RUNS"; echo "failing on purpose" >&2; exit 7; fi;; esac
echo "end $FARRO_JOB_ID $FARRO_CLAIM_TOKEN" >> "$RUNS"
`

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
	if err := os.WriteFile(script, []byte(handlerScript), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LOCKS", locks)
	t.Setenv("RUNS", runs)

	st, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 200
	failing := map[string]bool{}
	var reqs []job.SubmitRequest
	for i := range n {
		id := fmt.Sprintf("job-%03d", i)
		prompt := `{"n":` + fmt.Sprint(i) + `}`
		if i%40 == 7 {
			prompt, failing[id] = `{"fail":true}`, true
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
	a1.stop(syscall.SIGKILL) // mid-run: its handlers die with it, its claims wait for their lease
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

	// Every job succeeded; its last "end" line is its final claim's.
	type exec1 struct {
		token     string
		started   bool
		ended     bool
		attemptNo string
	}
	perJob := map[string][]*exec1{}
	f, err := os.Open(runs)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) < 3 {
			t.Fatalf("bad line in the runs file: %q", sc.Text())
		}
		switch w[0] {
		case "overlap":
			t.Errorf("job %s: two executions at the same time (claim %s found another running)", w[1], w[2])
		case "start":
			for _, e := range perJob[w[1]] {
				if e.token == w[2] {
					t.Errorf("job %s: claim %s started twice", w[1], w[2])
				}
			}
			perJob[w[1]] = append(perJob[w[1]], &exec1{token: w[2], started: true, attemptNo: w[3]})
		case "end":
			es := perJob[w[1]]
			if len(es) == 0 || es[len(es)-1].token != w[2] {
				t.Errorf("job %s: end of claim %s is not the end of the last one started", w[1], w[2])
				continue
			}
			es[len(es)-1].ended = true
		}
	}
	reran, retried := 0, 0
	for _, r := range reqs {
		j, err := st.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		es := perJob[r.ID]
		if j.Status != job.Succeeded || len(es) == 0 {
			t.Errorf("%s: %s with %d executions", r.ID, j.Status, len(es))
			continue
		}
		if last := es[len(es)-1]; last.token != j.ClaimToken || !last.ended {
			t.Errorf("%s: its last execution (%+v) is not its succeeded claim %s", r.ID, last, j.ClaimToken)
		}
		// A job failing on purpose fails its first attempt if that one
		// ran (not cut short by the kill): managerd retries it.
		if failing[r.ID] && es[0].attemptNo == "1" && es[0].ended {
			if len(es) < 2 || j.Attempts < 2 {
				t.Errorf("%s: failed on purpose, yet %d executions, %d attempts: not retried", r.ID, len(es), j.Attempts)
			}
			retried++
		}
		if !failing[r.ID] && len(es) > 1 {
			reran++
		}
	}
	if retried == 0 {
		t.Error("no job failed on purpose and was retried")
	}
	if reran == 0 {
		t.Error("no job ran again after the agent was killed: the kill did not land mid-run")
	}
	t.Logf("%d jobs ran again after the kill of an agent", reran)

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
