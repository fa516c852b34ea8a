package ctl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// farroctl agents and top on a database read the agents table (written
// by the daemons) and the running jobs (jobs.agent); submit without
// --max-attempts takes the limit managerd advertises there.
func TestStoreAgentsTopAndAdvertisedLimit(t *testing.T) {
	t.Parallel()
	b := pgBackend(t)
	b.setUp(t) // t1 runs two jobs, and has no row
	pg := b.st.(*pgstore.Store)
	ctx := storeCtx(t)
	for _, r := range []pgstore.Registration{
		{Kind: pgstore.KindAgentd, ID: "w1", Host: "hosta", PID: 4242, Version: "v1.2", Concurrency: 3, Kinds: []string{"exec"}, Fresh: time.Minute},
		{Kind: pgstore.KindManagerd, ID: "hosta", Host: "hosta", PID: 77, Version: "v1.2", MaxAttempts: 9, Fresh: time.Minute},
		{Kind: pgstore.KindWatchdogd, ID: "hostb", Host: "hostb", PID: 78, Version: "v1.2", Fresh: time.Minute},
	} {
		g, err := pg.Register(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind == pgstore.KindWatchdogd {
			if err := g.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	c, out, _ := b.ctl("")
	if err := c.Agents(ctl.AgentsOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^AGENT +STATE +PID +STARTED +SLOTS +JOBS +LAST SEEN +VERSION$`),
		regexp.MustCompile(`^t1 +gone \(no record\) +- +- +0 +2 +- +-$`),
		regexp.MustCompile(`^w1 +live +4242 +\d{4}-\d\d-\d\dT\S+Z +3 +0 +0s ago +v1\.2$`),
		regexp.MustCompile(`^\s*$`),
		regexp.MustCompile(`^DAEMON +STATE +PID +STARTED +LAST SEEN +VERSION$`),
		regexp.MustCompile(`^managerd@hosta +live +77 +\S+ +0s ago +v1\.2$`),
		regexp.MustCompile(`^watchdogd@hostb +gone \(stopped\) +78 +\S+ +0s ago +v1\.2$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("agents:\n%s", out)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("agents line %d %q does not match %s", i, lines[i], re)
		}
	}

	c, out, _ = b.ctl("")
	if err := c.Agents(ctl.AgentsOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Agents []struct {
			ID       string   `json:"id"`
			Host     string   `json:"host"`
			Kinds    []string `json:"kinds"`
			Live     bool     `json:"live"`
			JobsHeld int      `json:"jobs_held"`
		} `json:"agents"`
		Daemons []struct {
			ID          string `json:"id"`
			MaxAttempts int    `json:"max_attempts"`
		} `json:"daemons"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("agents --json: %v\n%s", err, out)
	}
	if len(doc.Agents) != 2 || doc.Agents[1].ID != "w1" || doc.Agents[1].Host != "hosta" || !doc.Agents[1].Live ||
		len(doc.Agents[1].Kinds) != 1 || doc.Agents[0].JobsHeld != 2 || len(doc.Daemons) != 2 || doc.Daemons[0].MaxAttempts != 9 {
		t.Fatalf("agents --json: %s", out)
	}

	c, out, _ = b.ctl("")
	if err := c.Top(ctl.TopOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	var top ctl.TopDoc
	if err := json.Unmarshal(out.Bytes(), &top); err != nil {
		t.Fatalf("top --json: %v\n%s", err, out)
	}
	if top.Total != 4 || top.States["in-progress"] != 2 || len(top.Workers) != 2 ||
		top.Workers[0].Agent != "t1" || top.Workers[0].State != "unregistered" || len(top.Workers[0].Jobs) != 2 ||
		top.Workers[0].Jobs[0].ID != "jobeee1" || top.Workers[0].Jobs[0].Kind != "exec" || top.Workers[0].Jobs[0].LastHeartbeat == nil ||
		top.Workers[1].Agent != "w1" || top.Workers[1].State != "live" || top.Workers[1].Slots != 3 ||
		len(top.Daemons) != 2 || top.Daemons[0].State != "live" || top.Daemons[1].State != "gone" {
		t.Fatalf("top --json: %s", out)
	}
	c, out, _ = b.ctl("")
	if err := c.Top(ctl.TopOptions{Once: true}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"jobeee1", "t1", "w1"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("top --once lacks %q:\n%s", w, out)
		}
	}

	c, out, _ = b.ctl(`{"n":1}`)
	if err := c.Submit(ctl.SubmitOptions{ID: "limited", Kind: "noop"}); err != nil {
		t.Fatal(err)
	}
	j, err := b.st.Get(ctx, "limited")
	if err != nil || j.MaxAttempts != 9 {
		t.Fatalf("submit without --max-attempts: %+v, %v; want managerd's 9", j, err)
	}
}

// farroctl events prints a database's transitions as a spool prints its
// stream: the same lines (text and JSON) for the same moves.
func TestStoreEventsSameLinesAsSpool(t *testing.T) {
	t.Parallel()
	var outs [2][2]string
	for i, b := range []*backend{spoolBackend(t), pgBackend(t)} {
		b.setUp(t)
		for k, js := range []bool{false, true} {
			c, out, _ := b.ctl("")
			if err := c.Events(ctl.EventsOptions{JSON: js}); err != nil {
				t.Fatalf("%s: events: %v", b.name, err)
			}
			outs[i][k] = out.String()
		}
	}
	if n := strings.Count(outs[1][0], "\n"); n != 10 {
		t.Errorf("postgres: %d lines, want 10:\n%s", n, outs[1][0])
	}
	for k := range 2 {
		if s, p := mask(outs[0][k]), mask(outs[1][k]); s != p {
			t.Errorf("events (json %v) differ:\nspool:\n%s\npostgres:\n%s", k == 1, s, p)
		}
	}
	c, out, _ := pgBackend(t).ctl("")
	if err := c.Events(ctl.EventsOptions{Job: "jobfff1"}); err != nil || out.Len() != 0 {
		t.Errorf("events --job of an empty database: %v %q", err, out)
	}
}

// events --follow on a database under concurrent moves: every
// transition is printed once, none is missed.
func TestStoreEventsFollowUnderConcurrentMoves(t *testing.T) {
	t.Parallel()
	b := pgBackend(t)
	ctx, cancel := context.WithCancel(storeCtx(t))
	defer cancel()
	c, _, _ := b.ctl("")
	out := &syncBuffer{}
	c.Stdout = out
	followed := make(chan error, 1)
	go func() {
		followed <- c.Events(ctl.EventsOptions{Follow: true, JSON: true, Poll: 5 * time.Millisecond, Context: ctx})
	}()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := job.Holder{Actor: "agentd/a", Agent: fmt.Sprintf("a%d", w)}
			for i := range 10 {
				id := fmt.Sprintf("w%d-%02d", w, i)
				if _, errs := b.st.Submit(ctx, []job.SubmitRequest{{ID: id, Kind: "noop", Prompt: []byte(`{}`), Actor: "t"}}); errs[0] != nil {
					t.Error(errs[0])
					return
				}
				cs, err := b.st.Claim(ctx, h, store.ClaimOptions{Max: 1, Lease: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				for _, cl := range cs {
					if err := cl.Commit(ctx, job.Succeeded, "", nil); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	// Every transition written (a claim may have found nothing: then a
	// job stays queued).
	all := map[string]bool{}
	for w := range 4 {
		for i := range 10 {
			id := fmt.Sprintf("w%d-%02d", w, i)
			evs, err := b.st.History(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				all[fmt.Sprintf("%s %s->%s %d", id, e.From, e.To, e.Attempt)] = true
			}
		}
	}
	want := len(all)
	if want < 4*10*2 {
		t.Fatalf("only %d transitions written", want)
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "\n") < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // ten more polls: nothing repeated late
	cancel()
	if err := <-followed; err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var l job.StreamLine
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Event.Type != job.StreamTransition {
			t.Fatalf("line %q: %v", line, err)
		}
		seen[fmt.Sprintf("%s %s->%s %d", l.JobID, l.Event.From, l.Event.To, *l.Attempt)]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s printed %d times", k, n)
		}
	}
	for k := range all {
		if seen[k] == 0 {
			t.Errorf("%s never printed", k)
		}
	}
	if len(seen) != want {
		t.Errorf("%d distinct transitions printed, want %d", len(seen), want)
	}
}

// pause, paused, resume and stats' paused kinds print the same on a
// database as on a spool; on the database the claim takes no job of a
// paused kind.
func TestStorePauseResumeSameAsSpool(t *testing.T) {
	t.Parallel()
	var outs [2][]string
	for i, b := range []*backend{spoolBackend(t), pgBackend(t)} {
		run := func(f func(c *ctl.Ctl) error) {
			c, out, _ := b.ctl("")
			if err := f(c); err != nil {
				t.Fatalf("%s: %v", b.name, err)
			}
			outs[i] = append(outs[i], mask(out.String()))
		}
		run(func(c *ctl.Ctl) error { return c.Pause([]string{"noop"}, "migrating") })
		run(func(c *ctl.Ctl) error { return c.Pause([]string{"noop"}, "still migrating") })
		run(func(c *ctl.Ctl) error { return c.Paused(false) })
		run(func(c *ctl.Ctl) error { return c.Stats(false) })
		if b.name == "postgres" {
			if _, errs := b.st.Submit(storeCtx(t), []job.SubmitRequest{{ID: "n1", Kind: "noop", Prompt: []byte(`{}`)}}); errs[0] != nil {
				t.Fatal(errs[0])
			}
			h := job.Holder{Actor: "agentd/w", Agent: "w"}
			if cs, err := b.st.Claim(storeCtx(t), h, store.ClaimOptions{Max: 1, Lease: time.Minute}); err != nil || len(cs) != 0 {
				t.Fatalf("claim of a paused kind: %v %v", cs, err)
			}
			c, out, _ := b.ctl("")
			if err := c.List(ctl.ListOptions{}); err != nil || !strings.Contains(out.String(), "[kind paused]") {
				t.Errorf("ls with noop paused: %v\n%s", err, out)
			}
		}
		run(func(c *ctl.Ctl) error { return c.Resume([]string{"noop"}) })
		run(func(c *ctl.Ctl) error { return c.Resume([]string{"noop"}) })
		run(func(c *ctl.Ctl) error { return c.Paused(false) })
		if b.name == "postgres" {
			h := job.Holder{Actor: "agentd/w", Agent: "w"}
			if cs, err := b.st.Claim(storeCtx(t), h, store.ClaimOptions{Max: 1, Lease: time.Minute}); err != nil || len(cs) != 1 {
				t.Fatalf("claim after resume: %v %v", cs, err)
			}
		}
	}
	if strings.Join(outs[0], "|") != strings.Join(outs[1], "|") {
		t.Errorf("spool and database differ:\nspool:\n%s\npostgres:\n%s", strings.Join(outs[0], "\n"), strings.Join(outs[1], "\n"))
	}
	if !strings.Contains(outs[1][2], "still migrating") || !strings.Contains(outs[1][3], "paused kinds noop") {
		t.Errorf("paused and stats on a database:\n%s", strings.Join(outs[1], "\n"))
	}
}
