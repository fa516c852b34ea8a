package crash

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// TestMissedNotifications runs the daemons without any usable directory
// notification and checks that every job is still picked up and driven to
// its end by the periodic rescans: with fsnotify disabled (--no-notify on
// every daemon), and with a simulated event-queue overflow (the
// crash-point build drops every fsnotify event and reports an overflow
// every 16 drops, as the kernel does when its queue is full). The jobs
// go through every watched directory: incoming/ (claims), failed/ and
// deferred/ (retries, scheduled jobs), held/ (operator), stale/ and the
// locks of incoming/ (an agent killed in the middle of a job).
func TestMissedNotifications(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemons; skipped with -short")
	}
	t.Parallel()
	for _, tc := range []struct {
		name  string
		bin   func(testing.TB) string
		flags []string
		env   []string
	}{
		{"no-notify", func(t testing.TB) string { return binaries(t.(*testing.T)) }, []string{"--no-notify", "--rescan", "500ms"}, nil},
		{"overflow", crashBinaries, []string{"--rescan", "2s"}, []string{"FARRO_DROP_EVENTS=16"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, tc.bin(t))
			c.envD = tc.env
			start := time.Now()
			c.start("watchdogd", "watchdogd", append([]string{"--interval", "50ms", "--lock-grace", "2s", "--crash-threshold", "10s"}, tc.flags...)...)
			c.start("managerd", "managerd", append([]string{"--backoff-base", "20ms", "--backoff-max", "100ms", "--tmp-max-age", "5s"}, tc.flags...)...)
			c.startAgent("a1", tc.flags...)
			c.startAgent("a2", tc.flags...)
			const n = 150
			for i := 0; i < n; i++ {
				id := fmt.Sprintf("n%03d", i)
				req := job.SubmitRequest{ID: id, Kind: "exec", Prompt: []byte(promptQuick), Priority: i % 3}
				switch i % 10 {
				case 1:
					req.Prompt, req.MaxAttempts = []byte(promptFailing), 2 // failed -> deferred -> queued -> failed -> killed
				case 2:
					req.NotBefore = time.Now().Add(300 * time.Millisecond) // deferred
				case 3:
					req.Held = true // released below
				}
				c.ledger.attempt(id)
				if _, err := c.spool.Submit(req); err != nil {
					t.Fatal(err)
				}
				c.ledger.ack(id)
			}
			// A slow job, whose agent is killed in the middle of it: stale/
			// and the lock of incoming/.
			c.submit("slow", promptSlow)
			var agent string
			if !waitUntil(60*time.Second, func() bool {
				st, a := c.state("slow")
				agent = a
				return st == job.InProgress && c.starts("slow") > 0
			}) {
				t.Fatal("the slow job never ran")
			}
			c.daemon(agent).kill()
			if err := writeRelease(c, "slow"); err != nil {
				t.Fatal(err)
			}
			for i := 3; i < n; i += 10 {
				c.ctl("release", fmt.Sprintf("n%03d", i))
			}
			c.waitQuiet(120*time.Second, true)
			took := time.Since(start)
			c.stopAll()
			rep := checkSpool(c.spool, c.records, c.ledger)
			for _, f := range rep.findings {
				t.Errorf("violation: %s", f)
			}
			summary.addScenario(c.killCount(), rep.jobs, rep.violations)
			if tc.env != nil {
				tr, _ := os.ReadFile(c.trace)
				if k := strings.Count(string(tr), "!fsnotify-overflow-injected"); k == 0 {
					t.Error("no overflow was injected: the test proves nothing")
				} else {
					t.Logf("%d overflows injected", k)
				}
			}
			t.Logf("%s: %d jobs terminal in %s without notifications; %s", tc.name, rep.jobs, took.Round(100*time.Millisecond), rep.violations)
		})
	}
}
