package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/ctl"
)

// crawlExportCommand is `farroctl crawl export NAME [--warc DIR
// [--warc-max-size SIZE]]`: JSON Lines of the artifacts, or WARC files.
func crawlExportCommand(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc, nameArg func(*cli.Context, int) ([]string, error)) *cli.Command {
	return &cli.Command{
		Name: "export", Usage: "print the crawl's artifacts as JSON Lines, or write them as WARC/1.1 files (--warc DIR)",
		ArgsUsage: "NAME", OnUsageError: usageErr,
		Description: `Without --warc: one JSON line per URL the crawl finished (the artifact, or what the outcome log kept of it).
With --warc DIR: WARC/1.1 files NAME-TIMESTAMP-NNNNN.warc.gz in DIR (gzip per record, a warcinfo record per
file, a new file past --warc-max-size): request and response records per fetch, revisit for unchanged
fetches (304 or the same body), a metadata record with the crawl outcome per URL. Prints the files' paths.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "warc", Usage: "write WARC files into directory `DIR` (created if missing)"},
			&cli.StringFlag{Name: "warc-max-size", Value: "1GiB", Usage: "start a new WARC file past `SIZE` bytes (units B, KiB, MiB, GiB)"},
		},
		Action: func(cc *cli.Context) error {
			a, err := nameArg(cc, 1)
			if err != nil {
				return err
			}
			if cc.String("warc") == "" {
				if cc.IsSet("warc-max-size") {
					return ctl.Usagef("--warc-max-size needs --warc DIR")
				}
				return c(cc).CrawlExport(a[0])
			}
			size, err := agent.ParseSize(cc.String("warc-max-size"))
			if err != nil || size <= 0 {
				return ctl.Usagef("--warc-max-size %q: want a positive size such as 512MiB", cc.String("warc-max-size"))
			}
			return c(cc).CrawlExportWARC(a[0], ctl.CrawlExportWARCOptions{Dir: cc.String("warc"), MaxSize: size})
		},
	}
}
