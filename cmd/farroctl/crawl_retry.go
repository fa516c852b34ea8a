package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
)

// crawlRetryCommand is farroctl crawl retry NAME [--state S] [--domain D].
func crawlRetryCommand(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) *cli.Command {
	return &cli.Command{
		Name:      "retry",
		Usage:     "put the crawl's failed URLs (last outcome failed or killed) back in its frontier; a done crawl runs again",
		ArgsUsage: "NAME", OnUsageError: usageErr,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "state", Usage: "only URLs whose last outcome is `S`: failed, killed (repeatable; default both)"},
			&cli.StringFlag{Name: "domain", Usage: "only URLs of domain `D`"},
		},
		Action: func(cc *cli.Context) error {
			args, err := absorbFlags(cc)
			if err != nil {
				return err
			}
			if len(args) != 1 {
				return ctl.Usagef("%s: want 1 argument(s), got %d (see --help)", cc.Command.Name, len(args))
			}
			return c(cc).CrawlRetry(ctl.CrawlRetryOptions{Name: args[0], States: cc.StringSlice("state"), Domain: cc.String("domain")})
		},
	}
}
