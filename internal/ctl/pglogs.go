package ctl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// storeLogs is logs on a PostgreSQL store. A handler's output is not in
// the database: it stays in the working directory of its attempt, in the
// local directory of the host whose agent ran it
// (<local>/scratch/<agent>/<id>/stdout.<N>.log). The agent of an attempt
// is the job's (the latest attempt) or the one that claimed it (its
// history); when farroctl's --spool holds that directory the output is
// printed exactly as on a spool, else one line names the host (the
// agents table) and the directory to read there (exit 1, as output not
// found).
func (c *Ctl) storeLogs(arg string, want int, streams []string) error {
	return c.withStore(func(d *storeDoor) error {
		id, err := d.resolve(arg)
		if err != nil {
			return err
		}
		j, err := d.st.Get(d.ctx, id)
		if err != nil {
			return err
		}
		if j.Attempts == 0 {
			return fmt.Errorf("%s: no output yet (%s, it has not run)", id, j.Status)
		}
		attempt, agent := want, j.Agent
		if want > j.Attempts {
			return fmt.Errorf("%s: no output of attempt %d (the job has had %d attempt(s))", id, want, j.Attempts)
		}
		if want > 0 && want != j.Attempts {
			if agent, err = attemptAgent(d, id, want); err != nil {
				return err
			}
		}
		if attempt == 0 {
			attempt = j.Attempts
		}
		if err := job.ValidateID(agent); err != nil {
			return fmt.Errorf("%s: attempt %d has no usable agent id in the database (%q): its output cannot be found", id, attempt, agent)
		}
		dir := filepath.Join(c.Root, daemon.ScratchDir, agent, id)
		fi, err := os.Lstat(dir)
		if err != nil {
			return fmt.Errorf("%s: %s", id, elsewhere(d, id, agent, attempt, c.Root))
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s: %s is not a directory (symlink or file): not read", id, dir)
		}
		got, files, sizes, _, err := openLogs(dir, want, streams)
		defer closeAll(files)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if got < 0 {
			return fmt.Errorf("%s: no output yet (%s, %d attempt(s), none with output files in %s)", id, j.Status, j.Attempts, dir)
		}
		return c.printLogs(id, got, streams, files, sizes)
	})
}

// attemptAgent is the agent that claimed attempt n of job id: the actor
// (agentd/<agent>) of the last claim event of that attempt.
func attemptAgent(d *storeDoor, id string, n int) (string, error) {
	evs, err := d.st.History(d.ctx, id)
	if err != nil {
		return "", err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		ev := evs[i]
		if ev.To == job.InProgress && ev.Attempt == n {
			if agent, ok := strings.CutPrefix(ev.Actor, "agentd/"); ok {
				return agent, nil
			}
			return "", fmt.Errorf("%s: attempt %d was claimed by %s, not an agentd: its output cannot be found", id, n, ev.Actor)
		}
	}
	return "", fmt.Errorf("%s: no output of attempt %d (its history has no claim of it)", id, n)
}

// elsewhere says where the output of the attempt is when the local
// directory does not hold it: the agent's host, as the agents table
// names it, and the directory under that host's local directory.
func elsewhere(d *storeDoor, id, agent string, attempt int, local string) string {
	where := filepath.Join(daemon.ScratchDir, agent, id) + "/"
	files := job.OutputName(job.Stdout, attempt) + ", " + job.OutputName(job.Stderr, attempt)
	host := ""
	if pg, ok := d.st.(*pgstore.Store); ok {
		if rows, _, err := pg.Agents(d.ctx); err == nil {
			for _, r := range rows {
				if r.Kind == pgstore.KindAgentd && r.ID == agent && !r.Unregistered {
					host = r.Host
				}
			}
		}
	}
	if host == "" {
		return fmt.Sprintf("attempt %d ran on agent %s (its host is not in the agents table); its output is in %s (%s) under that host's local directory, not under %s here: run farroctl logs there with --spool set to it",
			attempt, agent, where, files, local)
	}
	this, _ := os.Hostname()
	if host == this {
		return fmt.Sprintf("attempt %d ran on agent %s on this host (%s); its output is in %s (%s) under that agentd's local directory, not under %s: give farroctl --spool that directory",
			attempt, agent, host, where, files, local)
	}
	return fmt.Sprintf("attempt %d ran on agent %s on host %s; its output is there, in %s (%s) under its local directory: run farroctl logs on %s with --spool set to it",
		attempt, agent, host, where, files, host)
}
