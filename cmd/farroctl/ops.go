package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/completion"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/daemon"
)

// opsCommands are farroctl's operator tools: history, top, metrics, shell
// completion, and the (hidden) man page generator used for packaging.
func opsCommands(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) []*cli.Command {
	noArgs := func(cc *cli.Context) error {
		if cc.Args().Present() {
			return ctl.Usagef("%s takes no arguments", cc.Command.Name)
		}
		return nil
	}
	return []*cli.Command{
		{
			Name:         "history",
			Usage:        "print a job's transitions (its events.jsonl) as a table, or as JSON Lines with --json",
			ArgsUsage:    "ID",
			OnUsageError: usageErr,
			Flags:        []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print events.jsonl's lines as they are (time, actor, from, to, attempt, reason, correlation_id)"}},
			Action: func(cc *cli.Context) error {
				return c(cc).History(cc.Args().Slice(), ctl.HistoryOptions{JSON: cc.Bool("json")})
			},
		},
		{
			Name:  "top",
			Usage: "live view of the queue: jobs per state, oldest queued job, throughput, workers and their jobs",
			Description: `On a terminal the view is refreshed in place every --interval; q or Ctrl-C quits.
When stdout is not a terminal (a pipe, a file), or with --once, one plain snapshot is
printed; --json prints one snapshot as a JSON document.`,
			OnUsageError: usageErr,
			Flags: []cli.Flag{
				&cli.DurationFlag{Name: "interval", Value: 2e9, Usage: "refresh period of the live view"},
				&cli.BoolFlag{Name: "once", Usage: "print one plain snapshot and exit, even on a terminal"},
				&cli.BoolFlag{Name: "json", Usage: "print one snapshot as JSON and exit"},
			},
			Action: func(cc *cli.Context) error {
				if err := noArgs(cc); err != nil {
					return err
				}
				return c(cc).Top(ctl.TopOptions{Interval: cc.Duration("interval"), Once: cc.Bool("once"), JSON: cc.Bool("json")})
			},
		},
		{
			Name:  "metrics",
			Usage: "print the spool's metrics (Prometheus text format), or write them for node_exporter with --textfile",
			Description: `Lists the spool once and prints managerd's spool gauges (farro_jobs{state},
farro_oldest_queued_job_timestamp_seconds, farro_claim_locks, farro_corrupt_entries)
and farro_build_info. With --textfile DIR it writes DIR/farro.prom atomically, for
node_exporter's textfile collector (--collector.textfile.directory=DIR); run it from
a timer. Counters (runs, retries, recoveries, latencies) come from the daemons'
--metrics-addr endpoints only. On a PostgreSQL store (--store URL) the gauges are read
from the database: farro_jobs{state}, farro_jobs_by_kind and the oldest queued job;
locks, corrupt entries and the relisting time are a spool's and are left out.`,
			OnUsageError: usageErr,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "textfile", Usage: "write `DIR`/farro.prom (atomically) instead of printing"},
			},
			Action: func(cc *cli.Context) error {
				if err := noArgs(cc); err != nil {
					return err
				}
				return c(cc).Metrics(ctl.MetricsOptions{Textfile: cc.String("textfile"), Version: daemon.Version})
			},
		},
		{
			Name:  "completion",
			Usage: "print a shell completion script: bash or zsh",
			Description: `bash:  source <(farroctl completion bash)       (e.g. in ~/.bashrc)
zsh:   source <(farroctl completion zsh)        (after compinit)
The Debian package installs them for farroctl and the daemons.`,
			ArgsUsage:    "bash|zsh",
			OnUsageError: usageErr,
			Action: func(cc *cli.Context) error {
				if cc.Args().Len() != 1 {
					return ctl.Usagef("completion takes one argument: bash or zsh")
				}
				shell := cc.Args().First()
				if shell != "bash" && shell != "zsh" {
					return ctl.Usagef("completion: unknown shell %q (bash or zsh)", shell)
				}
				return completion.Write(cc.App.Writer, cc.App, shell, nil)
			},
		},
		{
			Name:   "man",
			Usage:  "print farroctl's man page (roff)",
			Hidden: true,
			Action: func(cc *cli.Context) error { return daemon.WriteMan(cc.App.Writer, cc.App) },
		},
	}
}
