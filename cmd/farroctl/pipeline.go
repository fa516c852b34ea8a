package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/source"
)

// pipelineCommands are farroctl's content pipeline commands: source (add,
// ls, show, rm) and pipeline (run, check, acquire, status). See
// docs/PIPELINE.md.
func pipelineCommands(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) []*cli.Command {
	def := source.New("", "")
	jsonFlag := &cli.BoolFlag{Name: "json", Usage: "print JSON"}
	args := func(cc *cli.Context, n int) ([]string, error) {
		a, err := absorbFlags(cc)
		if err != nil {
			return nil, err
		}
		if n >= 0 && len(a) != n {
			return nil, ctl.Usagef("%s: want %d argument(s), got %d (see --help)", cc.Command.Name, n, len(a))
		}
		return a, nil
	}
	add := &cli.Command{
		Name: "add", Usage: "register a source to monitor; it is due for its first check at once", ArgsUsage: "URL",
		Description: `NAME ([A-Za-z0-9][A-Za-z0-9_-]{0,59}) defaults to the URL's host and path. A first or changed
source is acquired by the crawl src-NAME with the source's scope and budgets (--max-pages per
acquisition). Failed checks back off: --backoff-base doubled per failure, at most --backoff-max.
Every next check gets a random jitter in [0, min(--jitter, --every/4)).`,
		OnUsageError: usageErr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "name", Usage: "source `NAME`"},
			&cli.DurationFlag{Name: "every", Value: def.Every.D(), Usage: "check interval"},
			&cli.StringFlag{Name: "scope", Value: string(def.Scope), Usage: "acquisition scope: host, domain or prefix"},
			&cli.IntFlag{Name: "max-depth", Value: def.MaxDepth, Usage: "links followed from the source URL when acquiring"},
			&cli.Int64Flag{Name: "max-pages", Usage: "URL jobs per acquisition (0: unlimited)"},
			&cli.DurationFlag{Name: "delay", Value: def.Delay.D(), Usage: "acquisition: minimum interval between two requests to a domain"},
			&cli.DurationFlag{Name: "backoff-base", Value: def.BackoffBase.D(), Usage: "wait after the first failed check (doubles per failure)"},
			&cli.DurationFlag{Name: "backoff-max", Value: def.BackoffMax.D(), Usage: "longest wait after failed checks"},
			&cli.DurationFlag{Name: "jitter", Value: def.Jitter.D(), Usage: "random extra wait before every next check, in [0, min(jitter, every/4))"},
			&cli.StringFlag{Name: "user-agent", Value: def.UserAgent, Usage: "User-Agent header (checks and acquisition)"},
			&cli.BoolFlag{Name: "allow-private", Usage: "allow private, loopback and link-local addresses (SSRF guard off)"},
			&cli.StringSliceFlag{Name: "resolve", Usage: "`HOST:PORT:ADDR`: connect to ADDR for HOST:PORT, as curl (repeatable)"},
			&cli.DurationFlag{Name: "timeout", Value: def.Timeout.D(), Usage: "per request"},
		},
		Action: func(cc *cli.Context) error {
			a, err := args(cc, 1)
			if err != nil {
				return err
			}
			return c(cc).SourceAdd(ctl.SourceAddOptions{
				URL: a[0], Name: cc.String("name"), Every: cc.Duration("every"), Scope: cc.String("scope"),
				MaxDepth: cc.Int("max-depth"), MaxPages: cc.Int64("max-pages"), Delay: cc.Duration("delay"),
				BackoffBase: cc.Duration("backoff-base"), BackoffMax: cc.Duration("backoff-max"), Jitter: cc.Duration("jitter"),
				UserAgent: cc.String("user-agent"), AllowPrivate: cc.Bool("allow-private"), Resolve: cc.StringSlice("resolve"),
				Timeout: cc.Duration("timeout"),
			})
		},
	}
	sourceCmd := &cli.Command{
		Name: "source", Usage: "monitored sources: add, ls, show, rm", OnUsageError: usageErr,
		Subcommands: []*cli.Command{
			add,
			{
				Name: "ls", Usage: "list the sources and their schedule", OnUsageError: usageErr, Flags: []cli.Flag{jsonFlag},
				Action: func(cc *cli.Context) error {
					if _, err := args(cc, 0); err != nil {
						return err
					}
					return c(cc).SourceList(cc.Bool("json"))
				},
			},
			{
				Name: "show", Usage: "print a source as JSON", ArgsUsage: "NAME", OnUsageError: usageErr,
				Action: func(cc *cli.Context) error {
					a, err := args(cc, 1)
					if err != nil {
						return err
					}
					return c(cc).SourceShow(a[0])
				},
			},
			{
				Name: "rm", Usage: "remove sources (their crawls are kept)", ArgsUsage: "NAME...", OnUsageError: usageErr,
				Action: func(cc *cli.Context) error {
					a, err := args(cc, -1)
					if err != nil {
						return err
					}
					return c(cc).SourceRemove(a)
				},
			},
		},
	}
	runFlags := func() []cli.Flag {
		return []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "print the plan; change nothing"},
			&cli.IntFlag{Name: "max-sources", Value: pipeline.DefaultMaxSources, Usage: "checks per run (0: no cap)"},
			&cli.IntFlag{Name: "max-per-domain", Value: pipeline.DefaultMaxPerDomain, Usage: "checks of one domain per run (0: no cap)"},
			&cli.DurationFlag{Name: "min-domain-interval", Value: pipeline.DefaultMinDomainInterval, Usage: "spacing of the requests to one domain: its checks (their jobs' not_before and its gate) and its acquisitions (their crawl's delay is raised to it)"},
			&cli.IntFlag{Name: "max-domain-requests", Value: pipeline.DefaultMaxDomainRequests, Usage: "requests to one domain per run, checks and acquired pages together (0: no cap)"},
			&cli.IntFlag{Name: "max-requests", Value: pipeline.DefaultMaxRequests, Usage: "requests per run in all, checks and acquired pages together (0: no cap)"},
			&cli.DurationFlag{Name: "refresh-interval", Value: pipeline.DefaultRefreshInterval, Usage: "exhausted domains of crawls are refreshed this long after their last response (0: never)"},
			&cli.IntFlag{Name: "max-refresh", Value: pipeline.DefaultMaxRefresh, Usage: "domains refreshed per run (0: no cap)"},
			jsonFlag,
			&cli.BoolFlag{Name: "log-json", Usage: "print the report as JSON log lines in the daemons' format (one per check, acquisition and refresh, then a summary), for the journal"},
		}
	}
	mode := func(m pipeline.Mode, usage string) *cli.Command {
		return &cli.Command{
			Name: string(m), Usage: usage, OnUsageError: usageErr, Flags: runFlags(),
			Action: func(cc *cli.Context) error {
				if _, err := args(cc, 0); err != nil {
					return err
				}
				return c(cc).Pipeline(ctl.PipelineOptions{
					Mode: m, DryRun: cc.Bool("dry-run"), MaxSources: cc.Int("max-sources"), MaxPerDomain: cc.Int("max-per-domain"),
					MinDomainInterval: cc.Duration("min-domain-interval"), RefreshInterval: cc.Duration("refresh-interval"),
					MaxDomainRequests: cc.Int("max-domain-requests"), MaxRequests: cc.Int("max-requests"),
					MaxRefresh: cc.Int("max-refresh"), JSON: cc.Bool("json"), LogJSON: cc.Bool("log-json"),
				})
			},
		}
	}
	pipelineCmd := &cli.Command{
		Name: "pipeline", Usage: "the content pipeline: check sources, acquire what changed, refresh due domains", OnUsageError: usageErr,
		Description: `One run is a set of farro jobs (source.check, run by agentd) and frontier requests:
sources due now are grouped by domain and queued round robin, at most --max-per-domain per
domain and --max-sources in all; the rest stays due for the next run (most overdue first).
See docs/PIPELINE.md.`,
		Subcommands: []*cli.Command{
			mode(pipeline.ModeRun, "check due sources (acquiring what changed), acquire pending sources, refresh due domains"),
			mode(pipeline.ModeCheck, "check due sources only; changed ones are left acquire-pending"),
			mode(pipeline.ModeAcquire, "acquire pending sources and refresh due domains; no checks"),
			{
				Name: "status", Usage: "every source's state and schedule, and the domains due for a refresh", OnUsageError: usageErr,
				Flags: []cli.Flag{
					&cli.DurationFlag{Name: "refresh-interval", Value: pipeline.DefaultRefreshInterval, Usage: "as for run"},
					jsonFlag,
				},
				Action: func(cc *cli.Context) error {
					if _, err := args(cc, 0); err != nil {
						return err
					}
					return c(cc).PipelineStatus(cc.Duration("refresh-interval"), cc.Bool("json"))
				},
			},
		},
	}
	return []*cli.Command{sourceCmd, pipelineCmd}
}
