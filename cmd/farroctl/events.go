package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
)

// eventsCommands is `farroctl events`: the spool-wide event stream.
func eventsCommands(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) []*cli.Command {
	return []*cli.Command{{
		Name:  "events",
		Usage: "print the spool's event stream (every job transition and operator action, events/*.jsonl), oldest first",
		Description: `Reads spool/events/<UTC hour>.jsonl in order: one line per job transition
(who, job, from -> to, attempt, reason) and per operator action (command, OS user,
jobs, reason). --follow keeps printing new lines, from new segments too, until
interrupted; --job ID keeps the lines about one job; --since D the lines of the
last D (e.g. 2h); --json prints the lines as they are (JSON Lines).`,
		OnUsageError: usageErr,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep reading as events are appended"},
			&cli.StringFlag{Name: "job", Usage: "only the events of job `ID`"},
			&cli.DurationFlag{Name: "since", Usage: "only the events of the last `D` (e.g. 30m, 2h)"},
			&cli.BoolFlag{Name: "json", Usage: "print the stream's lines as they are (JSON Lines)"},
		},
		Action: func(cc *cli.Context) error {
			if cc.Args().Present() {
				return ctl.Usagef("events takes no arguments (use --job ID)")
			}
			return c(cc).Events(ctl.EventsOptions{
				Follow: cc.Bool("follow"), Job: cc.String("job"), Since: cc.Duration("since"),
				JSON: cc.Bool("json"), Context: cc.Context,
			})
		},
	}}
}
