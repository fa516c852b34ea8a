package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
)

// crawlGrowCommands are farroctl crawl add-seeds NAME URL... and crawl set
// NAME --max-pages N ...: a running, paused or done crawl takes more.
func crawlGrowCommands(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) []*cli.Command {
	addSeeds := &cli.Command{
		Name:      "add-seeds",
		Usage:     "add seeds to a running, paused or done crawl: in scope like its other seeds, queued as pending URLs (a done crawl runs again)",
		ArgsUsage: "NAME URL...", OnUsageError: usageErr,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "priority", Usage: "the seeds' priority `N` (higher first within a depth)"},
			rankFlag(), sourceFlag(),
		},
		Action: func(cc *cli.Context) error {
			args, err := absorbFlags(cc)
			if err != nil {
				return err
			}
			if len(args) < 2 {
				return ctl.Usagef("%s: want NAME URL... (see --help)", cc.Command.Name)
			}
			return c(cc).CrawlAddSeeds(ctl.CrawlAddSeedsOptions{Name: args[0], URLs: args[1:], Priority: cc.Int("priority"), Rank: cc.Int("rank"), Source: cc.String("source")})
		},
	}
	set := &cli.Command{
		Name:      "set",
		Usage:     "change a crawl's budgets (and raise its max depth); a crawl done on its budget runs again",
		ArgsUsage: "NAME", OnUsageError: usageErr,
		Description: `Only the flags given change (their defaults below are not applied); budgets count URL jobs
released, 0 means unlimited. A done crawl whose budgets changed starts a new run; a paused one stays paused.`,
		Flags: []cli.Flag{
			&cli.Int64Flag{Name: "max-pages", Usage: "URL jobs released in total (0: unlimited)"},
			&cli.Int64Flag{Name: "max-pages-per-domain", Usage: "URL jobs released per domain (0: unlimited)"},
			&cli.Int64Flag{Name: "max-pages-per-run", Usage: "URL jobs released per run (0: unlimited)"},
			&cli.Int64Flag{Name: "max-pages-per-domain-per-run", Usage: "URL jobs released per domain per run (0: unlimited)"},
			&cli.IntFlag{Name: "max-depth", Usage: "links followed from a seed: only raised; applies to links found from now on"},
		},
		Action: func(cc *cli.Context) error {
			args, err := absorbFlags(cc)
			if err != nil {
				return err
			}
			if len(args) != 1 {
				return ctl.Usagef("%s: want 1 argument(s), got %d (see --help)", cc.Command.Name, len(args))
			}
			o := ctl.CrawlSetOptions{Name: args[0]}
			for _, f := range []struct {
				name string
				dst  **int64
			}{{"max-pages", &o.MaxPages}, {"max-pages-per-domain", &o.MaxPagesPerDomain}, {"max-pages-per-run", &o.MaxPagesPerRun}, {"max-pages-per-domain-per-run", &o.MaxPagesPerDomainPerRun}} {
				if cc.IsSet(f.name) {
					v := cc.Int64(f.name)
					*f.dst = &v
				}
			}
			if cc.IsSet("max-depth") {
				v := cc.Int("max-depth")
				o.MaxDepth = &v
			}
			return c(cc).CrawlSet(o)
		},
	}
	return []*cli.Command{addSeeds, set}
}

// rankFlag and sourceFlag are the seed rank and source of the seeds a
// command adds: terms of their domains' priority (docs/CRAWL.md).
func rankFlag() cli.Flag {
	return &cli.IntFlag{Name: "rank", Usage: "the seeds' rank `N` in a ranked list of domains (1 the best): their domains' seed_rank, which raises their priority score (0: none)"}
}

func sourceFlag() cli.Flag {
	return &cli.StringFlag{Name: "source", Usage: "where the seeds came from (a list and its version, e.g. tranco_20260205): their domains' source"}
}
