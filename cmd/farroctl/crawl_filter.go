package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/crawl"
)

// crawlFilterFlags are crawl start's URL and content-type filters and
// robots-meta switches (docs/CRAWL.md, "Filters and robots meta").
func crawlFilterFlags() []cli.Flag {
	return []cli.Flag{
		&cli.GenericFlag{Name: "accept-regex", Value: &patterns{}, Usage: "follow only links whose normalized URL matches `RE` (RE2; repeatable; any accept pattern matching is enough)"},
		&cli.GenericFlag{Name: "reject-regex", Value: &patterns{}, Usage: "never follow links whose normalized URL matches `RE` (repeatable; a reject wins over an accept)"},
		&cli.GenericFlag{Name: "accept-prefix", Value: &patterns{}, Usage: "follow only links starting with `PREFIX`: a path (/docs/) or a URL (repeatable)"},
		&cli.GenericFlag{Name: "reject-prefix", Value: &patterns{}, Usage: "never follow links starting with `PREFIX`: a path (/private/) or a URL (repeatable)"},
		&cli.StringSliceFlag{Name: "content-types", Usage: "download only 2xx bodies of these `TYPES` (comma-separated or repeated; text/html, image/*); default: all types"},
		&cli.BoolFlag{Name: "ignore-nofollow", Usage: "follow links marked rel=\"nofollow\" too"},
		&cli.BoolFlag{Name: "ignore-robots-meta", Usage: "ignore <meta name=\"robots\"> and X-Robots-Tag (noindex, nofollow, none)"},
	}
}

// applyCrawlFilterFlags copies the filter flags into cr (crawl.Validate
// checks them).
func applyCrawlFilterFlags(cc *cli.Context, cr *crawl.Crawl) {
	cr.AcceptRegex, cr.RejectRegex = patternsOf(cc, "accept-regex"), patternsOf(cc, "reject-regex")
	cr.AcceptPrefix, cr.RejectPrefix = patternsOf(cc, "accept-prefix"), patternsOf(cc, "reject-prefix")
	cr.ContentTypes = nil
	for _, v := range cc.StringSlice("content-types") {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				cr.ContentTypes = append(cr.ContentTypes, t)
			}
		}
	}
	cr.IgnoreNofollow, cr.IgnoreRobotsMeta = cc.Bool("ignore-nofollow"), cc.Bool("ignore-robots-meta")
}

// patterns is a repeatable flag whose values are kept whole: a regular
// expression may contain commas ("a{1,3}"), which StringSliceFlag would
// split.
type patterns []string

func (p *patterns) Set(v string) error { *p = append(*p, v); return nil }
func (p *patterns) String() string     { return strings.Join(*p, " ") }

func patternsOf(cc *cli.Context, name string) []string {
	if p, ok := cc.Generic(name).(*patterns); ok && p != nil {
		return append([]string(nil), *p...)
	}
	return nil
}
