package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
)

// crawlFsckCommand is farroctl crawl fsck NAME [--json].
func crawlFsckCommand(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) *cli.Command {
	return &cli.Command{
		Name:      "fsck",
		Usage:     "compare every counter of a crawl (crawl status, domain files) with a recount from its durable records; exit 1 if one differs",
		ArgsUsage: "NAME", OnUsageError: usageErr,
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print the stored counters, the recount and the differences as JSON"}},
		Action: func(cc *cli.Context) error {
			args, err := absorbFlags(cc)
			if err != nil {
				return err
			}
			if len(args) != 1 {
				return ctl.Usagef("%s: want 1 argument(s), got %d (see --help)", cc.Command.Name, len(args))
			}
			return c(cc).CrawlFsck(args[0], cc.Bool("json"))
		},
	}
}
