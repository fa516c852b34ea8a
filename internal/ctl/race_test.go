package ctl_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

// Audit F12: hold and show racing a real claim and commit of the job
// (another goroutine, the agent's transactions) must never report the job
// "found in 2 places" nor "not found": a job that moves while farroctl
// looks at it is neither a duplicate nor missing.
func TestActAndShowRaceClaimCommit(t *testing.T) {
	e := newEnv(t)
	const tries = 400
	outcomes := map[string]int{}
	var bad []string
	for i := 0; i < tries; i++ {
		id := fmt.Sprintf("race%03d", i)
		e.submit(id, nil)
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the agent: claim and commit at once
			defer wg.Done()
			<-start
			c, err := e.s.Claim(id, holder)
			if err != nil {
				return // hold won: the job is no longer queued
			}
			if err := c.Commit(job.Succeeded, "", nil); err != nil {
				t.Errorf("%s: commit: %v", id, err)
			}
		}()
		run := func(f func(*ctl.Ctl) error) (string, error) {
			var out, errOut bytes.Buffer
			c := &ctl.Ctl{Root: e.s.Root, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}
			err := f(c)
			return out.String() + errOut.String(), err
		}
		var holdOut, showOut string
		var holdErr, showErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			holdOut, holdErr = run(func(c *ctl.Ctl) error { return c.Act(ctl.Hold, []string{id}, ctl.ActOptions{}) })
		}()
		go func() {
			defer wg.Done()
			<-start
			showOut, showErr = run(func(c *ctl.Ctl) error { return c.Show([]string{id}) })
		}()
		close(start)
		wg.Wait()
		for _, r := range []struct {
			what, out string
			err       error
		}{{"hold", holdOut, holdErr}, {"show", showOut, showErr}} {
			text := r.out
			if r.err != nil {
				text += " " + r.err.Error()
			}
			switch {
			case strings.Contains(text, "places"), strings.Contains(text, "not found"):
				bad = append(bad, fmt.Sprintf("%s %s: %s", r.what, id, strings.TrimSpace(text)))
			case r.what == "hold" && strings.Contains(text, "-> held"):
				outcomes["hold: moved"]++
			case r.what == "hold" && strings.Contains(text, "requested"):
				outcomes["hold: requested"]++
			case r.what == "hold" && strings.Contains(text, "terminal"):
				outcomes["hold: already terminal"]++
			case r.err != nil:
				bad = append(bad, fmt.Sprintf("%s %s: unexpected: %s", r.what, id, strings.TrimSpace(text)))
			default:
				outcomes[r.what+": ok"]++
			}
		}
	}
	t.Logf("outcomes over %d tries: %v", tries, outcomes)
	if len(bad) > 0 {
		t.Fatalf("%d false errors, e.g.:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
}

// Audit F16: an unsafe ID is a usage error (exit 2) for the actions too,
// and nothing is touched, not even the valid IDs beside it.
func TestActUnsafeIDIsUsageError(t *testing.T) {
	e := newEnv(t)
	e.submit("ok", nil)
	for _, a := range ctl.Actions {
		err := e.ctl("").Act(a, []string{"ok", "a/../b"}, ctl.ActOptions{})
		if ctl.ExitCode(err) != ctl.ExitUsage {
			t.Errorf("%s 'a/../b': %v (exit %d), want exit %d", a, err, ctl.ExitCode(err), ctl.ExitUsage)
		}
	}
	if loc := e.where("ok"); loc.State != job.Queued {
		t.Fatalf("ok moved to %s", loc.State)
	}
}
