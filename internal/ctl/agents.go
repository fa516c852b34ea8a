package ctl

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/pkg/job"
)

// AgentsOptions are the flags of agents.
type AgentsOptions struct {
	JSON bool
}

// Agents lists the registered processes of the spool (internal/registry):
// the agents, with their pid, start time, slots, jobs held (directories in
// in-progress/<id>/), last_seen and whether they are live (their flock is
// held) or gone; then managerd and watchdogd. With JSON, one document
// {"agents": [...], "daemons": [...]}. On a PostgreSQL store the same,
// from its agents table (storeAgents): live is a fresh heartbeat, jobs
// are the agent's running jobs, and last seen is on the database's clock.
func (c *Ctl) Agents(o AgentsOptions) error {
	type listing struct {
		l   registry.Listing
		now time.Time
	}
	r, err := readFrom(c, func() (listing, error) {
		l, now, err := c.storeAgents()
		return listing{l, now}, err
	}, func(s *job.Spool) (listing, error) {
		l, err := registry.List(s)
		return listing{l, c.now()}, err
	})
	if err != nil {
		return err
	}
	l, now := r.l, r.now
	if o.JSON {
		b, err := json.MarshalIndent(l, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.Stdout, "%s\n", b)
		return err
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSTATE\tPID\tSTARTED\tSLOTS\tJOBS\tLAST SEEN\tVERSION")
	for _, e := range l.Agents {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", e.ID, agentState(e), pidOrDash(e.PID),
			stamp(e.StartedAt), e.Slots, e.JobsHeld, ago(e.LastSeen, now), dash(e.Version))
	}
	if len(l.Daemons) > 0 {
		fmt.Fprintln(tw, "\t\t\t\t\t\t\t")
		fmt.Fprintln(tw, "DAEMON\tSTATE\tPID\tSTARTED\t\t\tLAST SEEN\tVERSION")
		for _, e := range l.Daemons {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\t\t%s\t%s\n", e.ID, agentState(e), pidOrDash(e.PID),
				stamp(e.StartedAt), ago(e.LastSeen, now), dash(e.Version))
		}
	}
	return tw.Flush()
}

func agentState(e registry.Entry) string {
	st := "gone"
	switch {
	case e.Live:
		st = "live"
	case e.StoppedAt != nil:
		st = "gone (stopped)"
	}
	if e.Problem != "" {
		st += " (" + e.Problem + ")"
	}
	return st
}

func pidOrDash(pid int) string {
	if pid <= 0 {
		return "-"
	}
	return fmt.Sprint(pid)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String() + " ago"
}
