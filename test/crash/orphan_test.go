package crash

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// TestOrphanedHandlerIsNotRunTwice: a handler whose work runs in a child
// process (a shell script running a command, a pipeline) loses only its
// direct process to the parent-death signal when its agent is SIGKILLed;
// the child lives on. The job must not run again until that execution is
// over: the checker's flock sees any overlap. In "unrecorded", the handler
// file is removed from the lock before the kill, as if the agent had died
// before writing it: watchdogd must find the execution by its environment.
func TestOrphanedHandlerIsNotRunTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemons; skipped with -short")
	}
	t.Parallel()
	for _, unrecorded := range []bool{false, true} {
		name := "recorded"
		if unrecorded {
			name = "unrecorded"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, binaries(t))
			c.start("watchdogd", "watchdogd", fastWatchdog...)
			c.start("managerd", "managerd", fastManager...)
			a1 := c.startAgent("a1", "--concurrency", "1")
			c.submit("orphan", `{"in_child":true,"sleep_ms":3000,"fail_rate":0}`)
			handler := filepath.Join(c.spool.LockPath("orphan"), job.HandlerFile)
			if !waitUntil(30*time.Second, func() bool {
				st, _ := c.state("orphan")
				_, err := os.Stat(handler)
				return st == job.InProgress && c.starts("orphan") == 1 && err == nil
			}) {
				t.Fatal("the job never ran (or its handler was never recorded)")
			}
			if unrecorded {
				if err := os.Remove(handler); err != nil {
					t.Fatal(err)
				}
			}
			a1.kill()
			c.waitQuiet(60*time.Second, true)
			c.stopAll()
			rep := checkSpool(c.spool, c.records, c.ledger)
			for _, f := range rep.findings {
				t.Errorf("violation: %s", f)
			}
			if rep.Concurrent > 0 {
				c.explainOverlaps(t)
			}
			if execs, _ := loadExecutions(c.records, "orphan"); len(execs) != 2 {
				t.Errorf("%d executions, want 2 (the orphaned one, then the rerun)", len(execs))
			}
			summary.addScenario(c.killCount(), rep.jobs, rep.violations)
		})
	}
}
