package ctl_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
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
