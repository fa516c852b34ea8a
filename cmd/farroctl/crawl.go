package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
)

// crawlCommands are farroctl's crawl commands: crawl (start, ls, status,
// pause, resume, cancel, export), domains, domain (show, reset) and why.
func crawlCommands(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) []*cli.Command {
	def := crawl.New("")
	nameArg := func(cc *cli.Context, n int) ([]string, error) {
		args, err := absorbFlags(cc)
		if err != nil {
			return nil, err
		}
		if len(args) != n {
			return nil, ctl.Usagef("%s: want %d argument(s), got %d (see --help)", cc.Command.Name, n, len(args))
		}
		return args, nil
	}
	simple := func(name, usage string, fn func(*ctl.Ctl, string) error) *cli.Command {
		return &cli.Command{
			Name: name, Usage: usage, ArgsUsage: "NAME", OnUsageError: usageErr,
			Action: func(cc *cli.Context) error {
				a, err := nameArg(cc, 1)
				if err != nil {
					return err
				}
				return fn(c(cc), a[0])
			},
		}
	}
	jsonFlag := &cli.BoolFlag{Name: "json", Usage: "print JSON"}
	start := &cli.Command{
		Name:      "start",
		Usage:     "start a crawl: its configuration goes to the spool, managerd's frontier drives it",
		ArgsUsage: "NAME",
		Description: `NAME: [A-Za-z0-9][A-Za-z0-9_-]{0,63}, never reused. Prints NAME.
Seeds come from --seed (repeatable) and --seeds-file (lines "URL [PRIORITY] [rank=N] [source=NAME]",
'#' comments, - for stdin). A seed's rank (1 the best) and source become its domain's seed_rank and
source (--rank gives the --seed URLs theirs, --source every seed without one); the rank raises the
domain's priority score, which orders releases (docs/CRAWL.md).
Budgets count URL jobs released; 0 means unlimited. A run starts with start and with every resume;
a per-run budget reached pauses the crawl.`,
		OnUsageError: usageErr,
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "seed", Usage: "start `URL` (repeatable)"},
			&cli.StringFlag{Name: "seeds-file", Usage: "read seeds from `FILE` (- for stdin)"},
			rankFlag(), sourceFlag(), // crawl_set.go
			&cli.StringFlag{Name: "scope", Value: string(def.Scope), Usage: "host (the seeds' hosts, www. folded), domain (their registrable domains, subdomains included) or prefix (URLs starting with a seed)"},
			&cli.IntFlag{Name: "max-depth", Value: def.MaxDepth, Usage: "links followed from a seed (seeds: depth 0)"},
			&cli.Int64Flag{Name: "max-pages", Usage: "URL jobs released in total (0: unlimited)"},
			&cli.Int64Flag{Name: "max-pages-per-domain", Usage: "URL jobs released per domain (0: unlimited)"},
			&cli.Int64Flag{Name: "max-pages-per-run", Usage: "URL jobs released per run (0: unlimited)"},
			&cli.Int64Flag{Name: "max-pages-per-domain-per-run", Usage: "URL jobs released per domain per run (0: unlimited)"},
			&cli.DurationFlag{Name: "delay", Value: def.Delay.D(), Usage: "minimum interval between two requests to one domain"},
			&cli.DurationFlag{Name: "jitter", Value: def.Jitter.D(), Usage: "random extra interval, in [0, jitter)"},
			&cli.DurationFlag{Name: "max-crawl-delay", Value: def.MaxCrawlDelay.D(), Usage: "cap on robots.txt Crawl-delay"},
			&cli.IntFlag{Name: "max-in-flight-per-domain", Value: def.MaxInFlightPerDomain, Usage: "requests in flight per domain"},
			&cli.IntFlag{Name: "max-in-flight", Value: def.MaxInFlight, Usage: "jobs released and not finished, all domains"},
			&cli.StringFlag{Name: "user-agent", Value: def.UserAgent, Usage: "User-Agent header, and the product token robots.txt groups are matched with"},
			&cli.BoolFlag{Name: "obey-robots", Value: true, Usage: "obey robots.txt (RFC 9309); --obey-robots=false ignores it"},
			&cli.BoolFlag{Name: "sitemaps", Value: true, Usage: "take URLs from the sitemaps robots.txt lists (or /sitemap.xml); --sitemaps=false does not read them"},
			&cli.BoolFlag{Name: "allow-private", Usage: "allow private, loopback and link-local addresses (SSRF guard off)"},
			&cli.StringSliceFlag{Name: "resolve", Usage: "`HOST:PORT:ADDR`: connect to ADDR for HOST:PORT, as curl (repeatable)"},
			&cli.DurationFlag{Name: "timeout", Value: def.Timeout.D(), Usage: "per request"},
			&cli.DurationFlag{Name: "connect-timeout", Value: def.ConnectTimeout.D(), Usage: "per connection"},
			&cli.Int64Flag{Name: "max-body-bytes", Value: def.MaxBodyBytes, Usage: "body size cap (longer bodies are truncated)"},
			&cli.IntFlag{Name: "max-attempts", Usage: "failed attempts (network failures, 5xx) that end a URL while its domain answers (0: 3)"},
			&cli.IntFlag{Name: "max-redirects", Value: def.MaxRedirects, Usage: "redirect hops followed from a discovered URL"},
			&cli.IntFlag{Name: "block-threshold", Value: def.BlockThreshold, Usage: "consecutive 403/429/5xx that block a domain"},
			&cli.DurationFlag{Name: "block-cooldown", Value: def.BlockCooldown.D(), Usage: "how long a domain blocked otherwise (5xx answers, robots.txt unavailable) rests"},
			&cli.IntFlag{Name: "unreachable-threshold", Value: def.UnreachableThreshold, Usage: "consecutive network failures that make a domain unreachable"},
			&cli.DurationFlag{Name: "unreachable-cooldown", Value: def.UnreachableCooldown.D(), Usage: "how long an unreachable domain rests"},
			&cli.DurationFlag{Name: "unreachable-after", Value: def.UnreachableAfter.D(), Usage: "how long a domain's network failures must go on (besides --unreachable-threshold) before it is judged unreachable; shorter outages are retried on the domain's backoff"},
			&cli.DurationFlag{Name: "retry-backoff", Value: crawl.DefaultRetryBackoff, Usage: "first wait before a domain's next request after a network failure or 5xx (doubling, jittered)"},
			&cli.DurationFlag{Name: "retry-backoff-max", Value: crawl.DefaultRetryBackoffMax, Usage: "longest such wait"},
			&cli.IntFlag{Name: "max-domain-retries", Value: def.MaxDomainRetries, Usage: "cooldowns before a domain is given up for this crawl"},
			&cli.BoolFlag{Name: "sort-query", Usage: "normalization: sort query parameters"},
			&cli.BoolFlag{Name: "strip-www", Usage: "normalization: fold leading www. of hosts"},
			&cli.BoolFlag{Name: "lowercase-path", Usage: "normalization: lowercase paths"},
			&cli.BoolFlag{Name: "drop-empty-query", Usage: "normalization: drop an empty '?'"},
		}, append(append(crawlFilterFlags(), crawlCooldownFlags()...), crawlRequisiteFlags()...)...), // crawl_filter.go, crawl_cooldown.go, crawl_requisites.go
		Action: func(cc *cli.Context) error {
			a, err := nameArg(cc, 1)
			if err != nil {
				return err
			}
			cr := crawl.New(a[0])
			cr.Scope = crawl.Scope(cc.String("scope"))
			cr.MaxDepth = cc.Int("max-depth")
			cr.MaxPages, cr.MaxPagesPerDomain = cc.Int64("max-pages"), cc.Int64("max-pages-per-domain")
			cr.MaxPagesPerRun, cr.MaxPagesPerDomainPerRun = cc.Int64("max-pages-per-run"), cc.Int64("max-pages-per-domain-per-run")
			cr.Delay, cr.Jitter, cr.MaxCrawlDelay = crawl.Duration(cc.Duration("delay")), crawl.Duration(cc.Duration("jitter")), crawl.Duration(cc.Duration("max-crawl-delay"))
			cr.MaxInFlightPerDomain, cr.MaxInFlight = cc.Int("max-in-flight-per-domain"), cc.Int("max-in-flight")
			cr.UserAgent, cr.ObeyRobots, cr.AllowPrivate = cc.String("user-agent"), cc.Bool("obey-robots"), cc.Bool("allow-private")
			cr.Sitemaps = cc.Bool("sitemaps")
			cr.Timeout, cr.ConnectTimeout = crawl.Duration(cc.Duration("timeout")), crawl.Duration(cc.Duration("connect-timeout"))
			cr.MaxBodyBytes, cr.MaxAttempts, cr.MaxRedirects = cc.Int64("max-body-bytes"), cc.Int("max-attempts"), cc.Int("max-redirects")
			cr.BlockThreshold, cr.BlockCooldown = cc.Int("block-threshold"), crawl.Duration(cc.Duration("block-cooldown"))
			cr.UnreachableThreshold, cr.UnreachableCooldown = cc.Int("unreachable-threshold"), crawl.Duration(cc.Duration("unreachable-cooldown"))
			cr.UnreachableAfter = crawl.Duration(cc.Duration("unreachable-after"))
			cr.RetryBackoff, cr.RetryBackoffMax = crawl.Duration(cc.Duration("retry-backoff")), crawl.Duration(cc.Duration("retry-backoff-max"))
			cr.MaxDomainRetries = cc.Int("max-domain-retries")
			cr.Normalize = crawl.Normalization{SortQuery: cc.Bool("sort-query"), StripWWW: cc.Bool("strip-www"), LowercasePath: cc.Bool("lowercase-path"), DropEmptyQuery: cc.Bool("drop-empty-query")}
			applyCrawlFilterFlags(cc, cr)    // crawl_filter.go
			applyCrawlCooldownFlags(cc, cr)  // crawl_cooldown.go
			applyCrawlRequisiteFlags(cc, cr) // crawl_requisites.go
			return c(cc).CrawlStart(ctl.CrawlStartOptions{Crawl: cr, Seeds: cc.StringSlice("seed"), SeedsFile: cc.String("seeds-file"), Resolve: cc.StringSlice("resolve"),
				Rank: cc.Int("rank"), Source: cc.String("source")})
		},
	}
	crawlCmd := &cli.Command{
		Name:         "crawl",
		Usage:        "crawls: start, ls, status, pause, resume, cancel, export, retry, add-seeds, set",
		OnUsageError: usageErr,
		Subcommands: append([]*cli.Command{
			start,
			{
				Name: "ls", Usage: "list the crawls", OnUsageError: usageErr, Flags: []cli.Flag{jsonFlag},
				Action: func(cc *cli.Context) error {
					if cc.Args().Present() {
						return ctl.Usagef("crawl ls takes no arguments")
					}
					return c(cc).CrawlList(cc.Bool("json"))
				},
			},
			{
				Name: "status", Usage: "a crawl's progress: fetched, pending, in flight, failed, per-state and per-domain counts, rate",
				ArgsUsage: "NAME", OnUsageError: usageErr, Flags: []cli.Flag{jsonFlag},
				Action: func(cc *cli.Context) error {
					a, err := nameArg(cc, 1)
					if err != nil {
						return err
					}
					return c(cc).CrawlStatus(a[0], cc.Bool("json"))
				},
			},
			simple("pause", "stop releasing this crawl's URLs (jobs in flight finish); to stop a job kind queue-wide: farroctl pause KIND", (*ctl.Ctl).CrawlPause),
			simple("resume", "release this crawl's URLs again (a new run); a paused job kind: farroctl resume KIND", (*ctl.Ctl).CrawlResume),
			simple("cancel", "stop the crawl for good: nothing more is released, queued jobs are killed, running ones stopped", (*ctl.Ctl).CrawlCancel),
			crawlExportCommand(c, usageErr, nameArg), // crawl_warc.go
			crawlRetryCommand(c, usageErr),
			crawlFsckCommand(c, usageErr), // crawl_fsck.go
		}, crawlGrowCommands(c, usageErr)...), // crawl_set.go
	}
	domains := &cli.Command{
		Name: "domains", Usage: "the domain-status table of a crawl (or of every crawl)", OnUsageError: usageErr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "crawl", Usage: "only crawl `NAME`"},
			&cli.StringSliceFlag{Name: "status", Usage: "only domains in status `S`: pending, active, exhausted, blocked, unreachable"},
			&cli.StringFlag{Name: "by", Usage: "\"priority\": order by the domains' priority score (yield, pages left, errors, staleness), computed now (docs/PIPELINE.md); \"yield\": the top domains, by yield rate (pages with new content per page fetched)"},
			&cli.IntFlag{Name: "limit", Usage: "print at most `N` domains (0: all)"},
			jsonFlag, registryFlag, // domain_registry.go
		},
		Subcommands: []*cli.Command{domainsMigrateCommand(c, usageErr)},
		Action: func(cc *cli.Context) error {
			if cc.Args().Present() {
				return ctl.Usagef("domains takes no arguments (use --crawl)")
			}
			if cc.Bool("registry") {
				return c(cc).RegistryDomains(ctl.DomainsOptions{Crawl: cc.String("crawl"), Status: cc.StringSlice("status"), JSON: cc.Bool("json"), By: cc.String("by"), Limit: cc.Int("limit")})
			}
			return c(cc).Domains(ctl.DomainsOptions{Crawl: cc.String("crawl"), Status: cc.StringSlice("status"), JSON: cc.Bool("json"), By: cc.String("by"), Limit: cc.Int("limit")})
		},
	}
	domain := &cli.Command{
		Name: "domain", Usage: "one domain of a crawl: show, reset", OnUsageError: usageErr,
		Subcommands: []*cli.Command{
			{
				Name: "show", Usage: "print the domain's entity as JSON: the crawl's, with the registry's entry; DOMAIN alone: the registry's entry", ArgsUsage: "[NAME] DOMAIN", OnUsageError: usageErr,
				Action: func(cc *cli.Context) error {
					a, err := domainArgs(cc) // domain_registry.go
					if err != nil {
						return err
					}
					if len(a) == 1 {
						return c(cc).RegistryShow(a[0])
					}
					return c(cc).DomainShow(a[0], a[1])
				},
			},
			{
				Name: "reset", Usage: "put the domain back to pending (status, error streaks, cooldowns, robots.txt cache cleared) and re-crawl it: every page it knows is fetched again; its registry entry is reset too, so every crawl crawls it again and source checks it deferred are due again (DOMAIN alone: the registry's entry only)",
				ArgsUsage: "[NAME] DOMAIN", OnUsageError: usageErr,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "reason", Usage: "why (`TEXT`, one line): kept in the domain's reason and the audit line"},
					&cli.BoolFlag{Name: "no-recrawl", Usage: "only clear the status: pages already fetched are not fetched again"},
				},
				Action: func(cc *cli.Context) error {
					a, err := domainArgs(cc)
					if err != nil {
						return err
					}
					if len(a) == 1 {
						return c(cc).RegistryReset(a[0], cc.String("reason"))
					}
					return c(cc).DomainResetWith(ctl.DomainResetOptions{Crawl: a[0], Domain: a[1], Reason: cc.String("reason"), NoRecrawl: cc.Bool("no-recrawl")})
				},
			},
		},
	}
	whyCmd := &cli.Command{
		Name: "why", Usage: "why a URL is (not) fetched: never seen, out of scope, too deep, robots rule, over budget, cooling down, waiting, in flight, done",
		ArgsUsage: "NAME URL", OnUsageError: usageErr, Flags: []cli.Flag{jsonFlag},
		Action: func(cc *cli.Context) error {
			a, err := nameArg(cc, 2)
			if err != nil {
				return err
			}
			return c(cc).Why(a[0], a[1], cc.Bool("json"))
		},
	}
	return []*cli.Command{crawlCmd, domains, domain, whyCmd}
}

// absorbFlags lets the crawl commands take their flags after their
// arguments too ("crawl start NAME --seed URL", as the issue writes it):
// urfave/cli stops parsing flags at the first argument, so the flags found
// among the arguments are set here; the remaining arguments are returned.
func absorbFlags(cc *cli.Context) ([]string, error) {
	args := cc.Args().Slice()
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var fl cli.Flag
		for _, f := range cc.Command.Flags {
			for _, n := range f.Names() {
				if n == name {
					fl = f
				}
			}
		}
		if fl == nil {
			return nil, ctl.Usagef("%s: unknown flag %s (see --help)", cc.Command.Name, a)
		}
		if _, isBool := fl.(*cli.BoolFlag); isBool && !hasVal {
			val = "true"
		} else if !hasVal {
			if i+1 >= len(args) {
				return nil, ctl.Usagef("%s: flag %s needs a value", cc.Command.Name, a)
			}
			i++
			val = args[i]
		}
		if err := cc.Set(name, val); err != nil {
			return nil, ctl.Usagef("%s: %s %q: %v", cc.Command.Name, a, val, err)
		}
	}
	return pos, nil
}
