package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/crawl"
)

// crawlCooldownFlags are crawl start's per-reason cooldowns (beside
// --block-cooldown and --unreachable-cooldown).
func crawlCooldownFlags() []cli.Flag {
	def := crawl.DefaultCooldowns()
	return []cli.Flag{
		&cli.DurationFlag{Name: "forbidden-cooldown", Value: def.ForbiddenCooldown.D(), Usage: "how long a domain blocked by 403 answers rests"},
		&cli.DurationFlag{Name: "rate-limited-cooldown", Value: def.RateLimitedCooldown.D(), Usage: "how long a domain blocked by 429 answers rests"},
		&cli.DurationFlag{Name: "login-wall-cooldown", Value: def.LoginWallCooldown.D(), Usage: "how long a domain blocked by a login wall rests"},
		&cli.DurationFlag{Name: "refresh-cooldown", Usage: "how long an exhausted domain rests before farroctl pipeline refreshes it (0: the pipeline's --refresh-interval)"},
	}
}

// applyCrawlCooldownFlags sets the cooldowns of cr from the flags.
func applyCrawlCooldownFlags(cc *cli.Context, cr *crawl.Crawl) {
	cr.ForbiddenCooldown = crawl.Duration(cc.Duration("forbidden-cooldown"))
	cr.RateLimitedCooldown = crawl.Duration(cc.Duration("rate-limited-cooldown"))
	cr.LoginWallCooldown = crawl.Duration(cc.Duration("login-wall-cooldown"))
	cr.RefreshCooldown = crawl.Duration(cc.Duration("refresh-cooldown"))
}
