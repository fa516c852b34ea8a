package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
)

// pauseCommands pause and resume a job kind queue-wide (paused/<kind>),
// and list the paused kinds. Not to be confused with hold (one job) and
// crawl pause (one crawl).
func pauseCommands(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) []*cli.Command {
	return []*cli.Command{
		{
			Name:      "pause",
			Usage:     "pause a job kind queue-wide: no agent claims its queued jobs until resume (one job: hold; one crawl: crawl pause)",
			ArgsUsage: "KIND",
			Description: `Writes paused/KIND in the spool (durably), with who, when and --reason. Every
agentd stops claiming jobs of KIND within about a second: its queued jobs stay
queued, jobs already running finish. Other kinds run on. Pausing a paused kind
updates its reason. KIND is one of exec, noop, crawl.fetch, crawl.robots,
source.check.`,
			OnUsageError: usageErr,
			Flags:        []cli.Flag{&cli.StringFlag{Name: "reason", Usage: "why the kind is paused (shown by farroctl paused)"}},
			Action: func(cc *cli.Context) error {
				return c(cc).Pause(cc.Args().Slice(), cc.String("reason"))
			},
		},
		{
			Name:         "resume",
			Usage:        "resume a kind paused with farroctl pause: agents claim its jobs again (one job: release; one crawl: crawl resume)",
			ArgsUsage:    "KIND",
			OnUsageError: usageErr,
			Action:       func(cc *cli.Context) error { return c(cc).Resume(cc.Args().Slice()) },
		},
		{
			Name:         "paused",
			Usage:        "list the kinds paused queue-wide (farroctl pause): kind, since, by whom, reason",
			OnUsageError: usageErr,
			Flags:        []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print one JSON document: {\"paused\": [{kind, paused_at, paused_by, user, host, pid, reason, problem}], \"ignored\": [{name, why}]}"}},
			Action: func(cc *cli.Context) error {
				if cc.Args().Present() {
					return ctl.Usagef("paused takes no arguments")
				}
				return c(cc).Paused(cc.Bool("json"))
			},
		},
	}
}
