package crash

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// The prompts of the lifecycle scenario's jobs (see testhandler).
const (
	promptQuick   = `{"sleep_ms":5,"fail_rate":0}`
	promptFailing = `{"sleep_ms":5,"fail_rate":1}`
	promptSlow    = `{"until_release":true,"fail_rate":0}`
)

// lifecycleOptions vary the lifecycle scenario.
type lifecycleOptions struct {
	// retention adds a last phase: managerd restarted with --retention
	// removes every (terminal) job.
	retention bool
}

// runLifecycle drives a cluster through every transaction farro has, with
// a few jobs, while the armed crash points fire wherever they are:
//
//   - a corrupt job planted in incoming/ (quarantined by the agent that
//     claims it) and a tmp/ leftover (swept by managerd);
//   - quick jobs (succeed), a failing job (failed -> deferred -> queued ->
//     failed -> killed, out of attempts);
//   - a victim that runs until it is stopped: its agent is drained
//     (SIGTERM: released in-progress -> queued), then SIGKILLed twice
//     (watchdogd: stale; managerd: requeued, then killed as crashed and
//     out of retries);
//   - an operator (farroctl) who holds a deferred job and cancels it,
//     releases a job submitted held, requeues a deferred job, holds a
//     running job and releases it, cancels a running job, retries the
//     cancelled job (it runs again) and removes another killed job.
//
// It returns when the cluster is quiet (every job terminal, no lock, no
// leftover) and stopped, leaving the spool for the checker.
func runLifecycle(c *cluster, o lifecycleOptions) {
	t := c.t
	t.Helper()
	// Planted: a corrupt job for watchdogd's startup reconcile to
	// quarantine, and an old tmp/ leftover for managerd to sweep. (A
	// second corrupt job is planted once the daemons run, for an agent.)
	plantCorrupt(c, "bad-0")
	junk := c.spool.Path(job.TmpDir, "junk.0001")
	if err := os.Mkdir(junk, 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(junk, old, old)

	// watchdogd's startup reconcile quarantines bad-0 before any agent
	// could claim it; bad-1, planted once the agents run, is theirs.
	c.start("watchdogd", "watchdogd", fastWatchdog...)
	if !waitUntil(60*time.Second, func() bool { return c.logged("watchdogd", "startup reconcile done") }) {
		t.Error("watchdogd never finished its startup reconcile")
	}
	c.start("managerd", "managerd", fastManager...)
	c.startAgent("a1")
	c.startAgent("a2")
	plantCorrupt(c, "bad-1")

	c.submit("v1", promptSlow, "--max-attempts", "2", "--priority", "50")
	c.submit("h2", promptSlow, "--priority", "40")
	c.submit("c1", promptSlow, "--priority", "40")
	c.submit("q1", promptQuick)
	c.submit("q2", promptQuick)
	c.submit("f1", promptFailing, "--max-attempts", "2")
	c.submit("h1", promptQuick, "--held")
	c.submit("d1", promptQuick, "--in", "1h")
	c.submit("d2", promptQuick, "--in", "300ms")
	c.submit("d3", promptQuick, "--in", "1h")
	c.submit("q3", promptQuick)
	c.submit("r1", promptQuick, "--held")

	// The victim's agent is drained and killed only once the operator
	// has stopped the running jobs: a drain would release them and turn
	// the operator's requests into plain moves of queued jobs.
	var wg sync.WaitGroup
	wg.Add(2)
	operatorDone := make(chan struct{})
	go func() { defer wg.Done(); operator(c, operatorDone) }()
	go func() { defer wg.Done(); <-operatorDone; victim(c, "v1") }()
	wg.Wait()
	c.waitQuiet(90*time.Second, !o.retention)

	if o.retention {
		// Every job is terminal: a managerd with --retention removes them
		// all (renamed into tmp/, then deleted; the sweep finishes what
		// a crash interrupts).
		c.daemon("managerd").stop(20 * time.Second)
		for _, id := range c.ledger.acked() {
			c.ledger.expire(id)
		}
		c.start("managerd-retention", "managerd", append([]string{"--retention", "1ms"}, fastManager...)...)
		c.waitQuiet(60*time.Second, true)
	}
	c.stopAll()
}

// plantCorrupt puts a job directory with an unreadable job.json into
// incoming/ (built outside the spool, then renamed in); the ledger expects
// it in corrupt/.
func plantCorrupt(c *cluster, id string) {
	src := filepath.Join(c.dir, "plant-"+id)
	if err := os.Mkdir(src, 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, job.JobFile), []byte("{not json"), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.ledger.plant(id)
	if err := os.Rename(src, c.spool.JobDir(job.Queued, "", id)); err != nil {
		c.t.Fatal(err)
	}
}

// operator is the scripted farroctl user of the lifecycle scenario. It
// closes done once it has stopped the running jobs.
func operator(c *cluster, done chan<- struct{}) {
	defer close(done)
	act := func(action, id string) ctlResult { return c.ctl(action, id) }
	release := func(id string) {
		waitUntil(60*time.Second, func() bool {
			st, _ := c.state(id)
			if st == job.Held {
				act("release", id)
			}
			return st != job.Held && st != ""
		})
	}
	// Not running: deferred -> held -> killed; held -> queued; deferred -> queued.
	act("hold", "d1")
	act("cancel", "d1")
	act("release", "h1")
	act("requeue", "d3")
	// Terminal: retry the cancelled d1 (it runs again, as a new job),
	// and cancel r1, then remove it for good. A retry cut by a crash is
	// undone by recovery (d1 stays killed); an rm is repeated until the
	// job is gone.
	c.ledger.retry("d1")
	act("retry", "d1")
	c.ledger.expire("r1")
	if !waitUntil(60*time.Second, func() bool {
		switch st, _ := c.state("r1"); st {
		case "":
			return len(c.where("r1")) == 0
		case job.Killed:
			act("rm", "r1")
		default:
			act("cancel", "r1")
		}
		return false
	}) {
		c.t.Error("rm r1: the job is still there")
	}
	// Running: hold it (control.json; the agent commits held), then
	// release it for good. A hold that found the job between two runs
	// (a crash requeued it) moved it directly: release it and try again.
	for i := 0; i < 5; i++ {
		if stopRunning(c, "h2", "hold", job.Held) {
			break
		}
		release("h2")
	}
	if err := writeRelease(c, "h2"); err != nil {
		c.t.Error(err)
	}
	release("h2")
	// Running: cancel it.
	stopRunning(c, "c1", "cancel", job.Killed)
}

// stopRunning applies action (hold or cancel) to job id once it runs, and
// again to each new execution, until the job is in state want (or
// terminal). It reports whether a request reached a running job
// (control.json) rather than moving it directly.
func stopRunning(c *cluster, id, action string, want job.State) (viaControl bool) {
	asked := -1
	ok := waitUntil(90*time.Second, func() bool {
		st, _ := c.state(id)
		if st == want || st.Terminal() {
			return true
		}
		if n := c.starts(id); st == job.InProgress && n > 0 && n != asked {
			if r := c.ctl(action, id); r.code == 0 {
				asked = n
				viaControl = viaControl || strings.Contains(r.stdout, "requested")
			}
		}
		return false
	})
	if !ok {
		c.t.Errorf("%s %s: never reached %s", action, id, want)
	}
	return viaControl
}

// victim stops the victim job's agent each time the job runs: first a
// SIGTERM (drain: the job is released to incoming/), then SIGKILLs until
// the job is terminal (max_attempts 2: stale and requeued once, then
// killed as crashed and out of retries).
func victim(c *cluster, id string) {
	seen := 0
	for i := 0; ; i++ {
		var agent string
		ok := waitUntil(90*time.Second, func() bool {
			st, a := c.state(id)
			if st.Terminal() {
				agent = ""
				return true
			}
			agent = a
			return st == job.InProgress && c.starts(id) > seen
		})
		if !ok {
			c.t.Errorf("victim %s: no new execution within 90s", id)
			return
		}
		if agent == "" {
			return
		}
		seen = c.starts(id)
		d := c.daemon(agent)
		if d == nil {
			c.t.Errorf("victim %s runs on unknown agent %q", id, agent)
			return
		}
		if i == 0 {
			d.signal(syscall.SIGTERM)
		} else {
			d.kill()
		}
		// Wait until the job has left that agent.
		waitUntil(60*time.Second, func() bool {
			st, a := c.state(id)
			return !(st == job.InProgress && a == agent)
		})
	}
}

// pointCase is one crash point and how the harness reaches it: the kind
// of process armed with it, and points that must fire first (in other
// processes) to set up the half-done transaction it interrupts.
type pointCase struct {
	kind      string
	point     string
	setup     []pointCase
	retention bool
}

func (p pointCase) name() string {
	n := p.kind + ":" + p.point
	for _, s := range p.setup {
		n += "+after+" + s.kind + ":" + s.point
	}
	return n
}

// pointCases lists every crash point the harness knows, each with its
// scenario. Names are "<transaction>[@<qualifier>]/<step>:<before|after>";
// a point named "X:before" is also "just after" the step before X (no
// filesystem operation lies between them), and the last step of each
// transaction has its own ":after" point.
func pointCases() []pointCase {
	var cs []pointCase
	add := func(kind string, points ...string) {
		for _, p := range points {
			cs = append(cs, pointCase{kind: kind, point: p})
		}
	}
	moveSteps := []string{"lock:before", "write:before", "append:before", "rename:before", "unlock:before", "unlock:after"}
	moves := func(kind string, pairs ...string) {
		for _, pair := range pairs {
			for _, st := range moveSteps {
				add(kind, "move@"+pair+"/"+st)
			}
		}
	}

	// farroctl: submit, operator moves (hold, cancel, release, requeue),
	// retry and rm of terminal jobs, control requests to running jobs.
	add("farroctl", "submit/mkdir-tmp:before",
		"submit@prompt.json/create:before", "submit@job.json/create:before", "submit@events.jsonl/create:before",
		"submit/sync-tmp:before", "submit/lock:before", "submit/rename:before", "submit/unlock:before", "submit/unlock:after",
		"submit/sync:before")
	moves("farroctl", "deferred-held", "held-killed", "held-queued", "deferred-queued")
	add("farroctl", "retry/lock:before", "retry@killed/rename:before", "retry@killed/write:before",
		"retry@killed/append:before", "retry/unlock:before", "retry/unlock:after",
		"remove/lock:before", "remove/rename:before", "remove/remove:before", "remove/unlock:before", "remove/unlock:after")
	for _, a := range []string{"hold", "cancel"} {
		add("farroctl", "control@"+a+"/write:before", "control@"+a+"/write:after")
	}
	add("farroctl", "fsq/lock-owner:before", "fsq/write-rename:before")

	// agentd: load-job, heartbeat, commit-job to each target state, the
	// operator's control requests, quarantine of a corrupt job.
	add("agentd", "claim/lock:before", "claim/mkdir-agent:before", "claim/rename:before",
		"claim/write:before", "claim/sync:before", "claim/replace:before", "claim/append:before", "claim/append:after",
		"heartbeat/write:before", "heartbeat/write:after")
	for _, to := range []string{"succeeded", "failed", "held", "killed", "queued"} {
		for _, st := range []string{"write:before", "sync:before", "replace:before", "append:before", "sync2:before", "rename:before", "unlock:before", "unlock:after"} {
			add("agentd", "commit@"+to+"/"+st)
		}
	}
	add("agentd", "agent@hold/remove-control:before", "agent@cancel/remove-control:before",
		"quarantine/rename:before", "quarantine/note:before", "quarantine/note:after",
		"fsq/write-rename:before") // its locks come whole from its pool: no fsq/lock-owner:before

	// managerd: retry (stale -> queued), defer (failed -> deferred),
	// promote (deferred -> queued), kill (failed/stale -> killed), the tmp/
	// sweep and retention.
	moves("managerd", "failed-deferred", "failed-killed", "stale-queued", "stale-killed", "deferred-queued")
	add("managerd", "sweep/remove:before", "fsq/lock-owner:before", "fsq/write-rename:before")
	for _, st := range []string{"lock:before", "rename:before", "remove:before", "unlock:before", "unlock:after"} {
		cs = append(cs, pointCase{kind: "managerd", point: "expire/" + st, retention: true})
	}

	// watchdogd: recovery of each kind of half-done transaction.
	// (Its first job.json write is a quarantine note: fsq/write-rename
	// interrupts that one; the stale marking's write is recover@stale.)
	add("watchdogd", "recover/guard:before", "recover/to-stale:before",
		"recover@stale/write:before", "recover@stale/append:before",
		"recover/unlock:before", "recover/unlock:after", "fsq/write-rename:before",
		"quarantine/rename:before", "quarantine/note:before", "quarantine/note:after")
	cs = append(cs,
		// A claim cut after its rename: rolled back to incoming/.
		pointCase{kind: "watchdogd", point: "recover@queued/rename:before",
			setup: []pointCase{{kind: "agentd", point: "claim/write:before"}}},
		// A commit cut after its status write: rolled forward, not re-run.
		pointCase{kind: "watchdogd", point: "recover@succeeded/rename:before",
			setup: []pointCase{{kind: "agentd", point: "commit@succeeded/rename:before"}}},
		// A managerd move cut after its status write: rolled forward.
		pointCase{kind: "watchdogd", point: "recover@deferred/rename:before",
			setup: []pointCase{{kind: "managerd", point: "move@failed-deferred/rename:before"}}},
	)
	return cs
}

// basePoint strips the qualifier: "commit@succeeded/rename:before" is
// the call site "commit/rename:before".
func basePoint(p string) string {
	txn, rest, ok := strings.Cut(p, "/")
	if !ok {
		return p
	}
	txn, _, _ = strings.Cut(txn, "@")
	return txn + "/" + rest
}

// writeRelease lets job id's running until_release executions end.
func writeRelease(c *cluster, id string) error {
	return os.WriteFile(filepath.Join(c.records, id+".release"), nil, 0o644)
}
