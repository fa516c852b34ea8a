package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
)

// logsCommands is farroctl logs: a job's output, by attempt.
func logsCommands(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) []*cli.Command {
	return []*cli.Command{{
		Name:      "logs",
		Usage:     "print a job's output (its handler's stdout and stderr), by attempt, wherever the job is",
		ArgsUsage: "ID",
		Description: `Each attempt's output is kept in the job directory as stdout.<N>.log and
stderr.<N>.log (N: the attempt). Without --attempt the latest attempt is printed,
running or not (a running job's output as far as it is written). Both streams by
default, each under a "==> stdout, attempt N <==" label; --stdout or --stderr prints
one stream as it is. An attempt without output is a one-line error, exit 1.
On a PostgreSQL store (--store URL) the output is in the local directory of the host
whose agent ran the attempt (<local>/scratch/<agent>/<id>/): printed when --spool is
that directory, else one line names the host and the directory there, exit 1.`,
		OnUsageError: usageErr,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "attempt", Usage: "print attempt `N` (from 1) instead of the latest", DefaultText: "the latest"},
			&cli.BoolFlag{Name: "stdout", Usage: "print stdout only, unlabelled"},
			&cli.BoolFlag{Name: "stderr", Usage: "print stderr only, unlabelled"},
			&cli.BoolFlag{Name: "both", Usage: "print both streams, each labelled: what logs does without --stdout or --stderr"},
		},
		Action: func(cc *cli.Context) error {
			if cc.IsSet("attempt") && cc.Int("attempt") < 1 {
				return ctl.Usagef("--attempt counts from 1, got %d", cc.Int("attempt"))
			}
			o := ctl.LogsOptions{Attempt: cc.Int("attempt"), Stdout: cc.Bool("stdout"), Stderr: cc.Bool("stderr")}
			if cc.Bool("both") {
				if o.Stdout != o.Stderr {
					return ctl.Usagef("--both with --%s: choose one", map[bool]string{true: "stdout", false: "stderr"}[o.Stdout])
				}
				o.Stdout, o.Stderr = true, true
			}
			return c(cc).Logs(cc.Args().Slice(), o)
		},
	}}
}
