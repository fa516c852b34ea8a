package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/pkg/job"
)

// addMan adds what is agentd's own to the daemons' man page and --help:
// exit status agent.ExitHandlerUnusable, the drain's --drain-timeout and
// the environment of an exec handler.
func addMan(app *cli.App) {
	daemon.AddExit(app, agent.ExitHandlerUnusable, "unusable exec handler: --exec (FARRO_EXEC) names a file that is missing or not executable; agentd@.service does not restart on it")
	p := daemon.ManOf(app)
	p.Signals[0].Text = "start a graceful drain: agentd claims nothing more; running jobs get --drain-timeout to finish, then their handlers are stopped (SIGTERM to the process group, SIGKILL after --kill-grace) and the jobs are given back to incoming/ with their attempt refunded; then agentd tells systemd STOPPING=1 and exits 0"
	p.EnvNote = "An exec handler runs with agentd's environment plus " + strings.Join([]string{
		job.EnvJobID + " (the job's ID)",
		job.EnvJobDir + " (the job's directory, in-progress/<agent>/<job id>/)",
		"FARRO_ATTEMPT (the attempt, from 1)",
		"FARRO_CORRELATION_ID",
		job.EnvClaimToken + " (the claim's fencing token)",
	}, ", ") + "; prompt.json on stdin."
}
