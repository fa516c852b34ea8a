package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/completion"
	"github.com/farro-dev/farro/internal/ctl"
)

// actArgsUsage is the arguments line of every action: IDs (or unique
// prefixes of them), "-" for IDs on stdin, or a filter.
const actArgsUsage = "ID... | - | --state S [--kind K] [--older-than D] [--all]"

// filterFlags select an action's jobs instead of IDs (postsuper-like):
// without --all the action only says what it would do.
func filterFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "state", Usage: "instead of IDs, select the jobs in state `S` (repeatable or comma-separated); a dry run unless --all"},
		&cli.StringFlag{Name: "kind", Usage: "with --state: only jobs of this `KIND`"},
		&cli.DurationFlag{Name: "older-than", Usage: "with --state: only jobs in their state for longer than `D` (since updated_at; started_at when in-progress)"},
		&cli.BoolFlag{Name: "all", Usage: "with --state: act on every selected job (without it, only print how many would be acted on)"},
	}
}

func filterOf(cc *cli.Context) ctl.Filter {
	return ctl.Filter{
		States: cc.StringSlice("state"), Kind: cc.String("kind"),
		OlderThan: cc.Duration("older-than"), All: cc.Bool("all"),
	}
}

// jobIDsCommand is the hidden command the completion scripts run to offer
// job IDs: "__jobids COMMAND PREFIX".
func jobIDsCommand(c func(*cli.Context) *ctl.Ctl) *cli.Command {
	return &cli.Command{
		Name:   completion.JobIDsCommand,
		Usage:  "print the job IDs COMMAND takes that start with PREFIX (for shell completion)",
		Hidden: true,
		Action: func(cc *cli.Context) error {
			if cc.Args().Len() < 1 || cc.Args().Len() > 2 {
				return ctl.Usagef("%s takes COMMAND [PREFIX]", completion.JobIDsCommand)
			}
			return c(cc).CompleteIDs(cc.Args().Get(0), cc.Args().Get(1))
		},
	}
}
