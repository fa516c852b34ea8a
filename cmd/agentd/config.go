package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/pkg/job"
)

// validate is agentd's configuration check (daemon.SetValidator), run
// before it starts and by --check-config: a valid agent id, at least one
// worker slot, a per-job timeout that is not negative (0: none), and a
// positive heartbeat, drain timeout, kill grace and rescan period (0 has
// no meaning for those), and an --output-max that is a size.
func validate(c *cli.Context) error {
	if err := job.ValidateID(c.String("id")); err != nil {
		return daemon.Configf("%s: %v", daemon.RefValue(c, "id", `"`+c.String("id")+`"`), err)
	}
	return daemon.First(
		daemon.AtLeast(c, "concurrency", 1),
		daemon.NotNegative(c, "timeout"),
		daemon.Positive(c, "heartbeat"),
		daemon.Positive(c, "drain-timeout"),
		daemon.Positive(c, "kill-grace"),
		daemon.Positive(c, "rescan"),
		outputMax(c),
		lease(c),
	)
}

// lease checks --lease: positive, and with a PostgreSQL store longer
// than --heartbeat (a lease
// that runs out between two renewals would lose every claim).
func lease(c *cli.Context) error {
	if err := daemon.Positive(c, "lease"); err != nil {
		return err
	}
	if daemon.StoreURL(c) != "" && c.Duration("lease") <= c.Duration("heartbeat") {
		return daemon.Configf("%s: must be longer than %s (%s)", daemon.RefValue(c, "lease", c.Duration("lease").String()), daemon.Ref(c, "heartbeat"), c.Duration("heartbeat"))
	}
	return nil
}

// outputMax checks --output-max: a size such as 64KiB, 16MiB or 1GiB
// (0: no limit).
func outputMax(c *cli.Context) error {
	if _, err := agent.ParseSize(c.String("output-max")); err != nil {
		return daemon.Configf("%s: %v", daemon.RefValue(c, "output-max", `"`+c.String("output-max")+`"`), err)
	}
	return nil
}

// handlerCommand is the exec handler's command line: what follows --exec
// on the command line, else FARRO_EXEC (or --exec=) split on spaces.
func handlerCommand(c *cli.Context) []string {
	if handlerArgs, _ := c.App.Metadata["exec-args"].([]string); len(handlerArgs) > 0 {
		return handlerArgs
	}
	return strings.Fields(c.String("exec"))
}

// checkOnly is agentd --check-config past the flags: the spool (read
// only) and the exec handler, checked as at start (exit
// agent.ExitHandlerUnusable when it cannot be used). No lock is taken,
// nothing is written.
func checkOnly(c *cli.Context, command []string) error {
	if daemon.StoreURL(c) != "" {
		if err := daemon.CheckShared(c.Context, c); err != nil {
			return err
		}
	} else if err := daemon.CheckSpool(c.String("spool")); err != nil {
		return err
	}
	if len(command) > 0 {
		if err := (&agent.Exec{Command: command}).Check(); err != nil {
			return &agent.HandlerError{Kind: "exec", Err: err}
		}
	}
	return daemon.ConfigOK(c)
}
