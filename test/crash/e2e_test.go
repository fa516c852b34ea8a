package crash

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// TestEndToEndRecovery runs the real binaries: two agents, managerd and
// watchdogd on a temp spool with 500 jobs whose handler fails about one time
// in five. It SIGKILLs an agent in the middle of a job and restarts it, then
// checks that every job is in exactly one place, terminal, within its
// attempts, never executed twice at once, and that every log line is
// well-formed JSON.
func TestEndToEndRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds and runs the daemons; skipped with -short")
	}
	bin := binaries(t)
	dir := t.TempDir()
	spoolDir := filepath.Join(dir, "spool")
	records := filepath.Join(dir, "records")
	if err := os.MkdirAll(records, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := job.Open(spoolDir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := 0; i < n; i++ {
		if _, err := s.Submit(job.SubmitRequest{ID: fmt.Sprintf("job-%04d", i), Kind: "exec", Prompt: []byte(`{}`), Priority: i % 3}); err != nil {
			t.Fatal(err)
		}
	}

	// The victim: a slow job at top priority, which a1 claims first.
	if _, err := s.Submit(job.SubmitRequest{ID: "victim", Kind: "exec", Priority: 100, Prompt: []byte(`{"sleep_ms":3000,"fail_rate":0}`)}); err != nil {
		t.Fatal(err)
	}

	env := []string{"FARRO_SPOOL=" + spoolDir, "CRASHTEST_RECORDS=" + records}
	agentArgs := func(id string) []string {
		return []string{bin + "/agentd", "--id", id, "--concurrency", "2", "--heartbeat", "200ms", "--exec", bin + "/testhandler"}
	}
	start := time.Now()
	startDaemon(t, dir, "watchdogd", env, bin+"/watchdogd")
	startDaemon(t, dir, "managerd", env, bin+"/managerd", "--backoff-base", "20ms", "--backoff-max", "200ms")
	a1 := startDaemon(t, dir, "agent-a1", env, agentArgs("a1")...)

	// Kill a1 in the middle of the victim's handler, then restart it.
	waitFor(t, 30*time.Second, "agent a1 to run the victim job", func() bool {
		_, err := os.Stat(filepath.Join(records, "victim.jsonl"))
		return err == nil
	})
	a2 := startDaemon(t, dir, "agent-a2", env, agentArgs("a2")...)
	time.Sleep(100 * time.Millisecond)
	a1.kill()
	killedAt := time.Now()
	var recovery time.Duration
	waitFor(t, 10*time.Second, "the killed agent's job to be back in incoming/ or claimed again", func() bool {
		locs, err := s.Locate("victim")
		if err != nil || len(locs) != 1 {
			return false
		}
		if l := locs[0]; l.State == job.Queued || (l.State == job.InProgress && l.Agent == "a2") {
			recovery = time.Since(killedAt)
			return true
		}
		return false
	})
	t.Logf("victim recovered %.0f ms after its agent was SIGKILLed", recovery.Seconds()*1000)
	if recovery > 2*time.Second {
		t.Errorf("recovery took %s, want <= 2s with default settings", recovery)
	}
	a1.start(t)

	var c census
	waitFor(t, 180*time.Second, "all jobs to be terminal", func() bool {
		c = takeCensus(t, s)
		done := 0
		for _, st := range c.where {
			if len(st) == 1 && st[0].Terminal() {
				done++
			}
		}
		return done == n+1
	})
	elapsed := time.Since(start)
	t.Logf("%d jobs terminal in %s (%.0f jobs/s) with one agent SIGKILL", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())

	for _, d := range []*daemonProc{a1, a2} {
		d.stop(t, 10*time.Second)
	}
	// watchdogd still runs: a lock it holds for a recovery under way (a
	// dead agent's lock on a job already rolled forward) goes away within
	// a pass. A lock still there after that is an orphan.
	lockWait := time.Now().Add(10 * time.Second)
	for c = takeCensus(t, s); len(c.locks) > 0 && time.Now().Before(lockWait); c = takeCensus(t, s) {
		time.Sleep(50 * time.Millisecond)
	}

	// Every job exactly once, terminal; nothing unexpected, nothing left over.
	if len(c.where) != n+1 {
		t.Errorf("found %d job ids, want %d", len(c.where), n+1)
	}
	if v, err := job.ReadJob(s.JobDir(job.Succeeded, "", "victim")); err != nil || v.Attempts != 2 {
		t.Errorf("victim: want succeeded on its second attempt, got %+v, %v", v, err)
	}
	if ex := readExecutions(t, records, "victim"); len(ex) != 2 || ex[0].end != 0 || ex[1].start < killedAt.UnixNano() {
		t.Errorf("victim executions %+v: want a killed one, then one started after the kill", ex)
	}
	succeeded, killed := 0, 0
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("job-%04d", i)
		st := c.where[id]
		if len(st) != 1 {
			t.Errorf("job %s found in %v, want exactly one place", id, st)
			continue
		}
		switch st[0] {
		case job.Succeeded:
			succeeded++
		case job.Killed:
			killed++
		default:
			t.Errorf("job %s ended %s", id, st[0])
			continue
		}
		j, err := job.ReadJob(s.JobDir(st[0], "", id))
		if err != nil {
			t.Errorf("job %s: %v", id, err)
			continue
		}
		if j.Attempts > 3 {
			t.Errorf("job %s: %d attempts, max 3", id, j.Attempts)
		}
		if j.Status == job.Killed && j.Reason == "" {
			t.Errorf("job %s killed without a reason", id)
		}
		execs := readExecutions(t, records, id)
		if len(execs) > j.Attempts {
			t.Errorf("job %s: %d executions for %d attempts", id, len(execs), j.Attempts)
		}
		for k := 1; k < len(execs); k++ {
			prevEnd := execs[k-1].end
			if prevEnd == 0 {
				prevEnd = killedAt.UnixNano()
			}
			if execs[k].start < prevEnd {
				t.Errorf("job %s: execution %d started before execution %d ended", id, k, k-1)
			}
		}
	}
	t.Logf("succeeded %d, killed %d", succeeded, killed)
	if len(c.locks) > 0 || len(c.tmp) > 0 || len(c.corrupt) > 0 {
		t.Errorf("leftovers: locks %v, tmp %v, corrupt %v", c.locks, c.tmp, c.corrupt)
		for _, l := range c.locks {
			owner, err := fsq.ReadOwner(s.Path(job.Queued.Dir(), l))
			ents, _ := os.ReadDir(s.Path(job.Queued.Dir(), l))
			t.Logf("lock %s: owner %q (%v), entries %v", l, owner, err, ents)
		}
	}
	if killed == 0 && succeeded == n {
		t.Logf("note: no job ran out of attempts in this run")
	}

	transitions := 0
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		transitions += checkLogLines(t, l)
	}
	if transitions < 2*n {
		t.Errorf("saw %d transition log lines, want at least %d (claim and commit of every job)", transitions, 2*n)
	}
}
