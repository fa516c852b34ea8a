package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/crawl"
)

// crawlRequisiteFlags is crawl start's --page-requisites (docs/CRAWL.md,
// "Images"), named after wget's --page-requisites.
func crawlRequisiteFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "page-requisites", Usage: "also fetch what pages reference, as URL jobs within scope, budgets, robots.txt and politeness: `KINDS` images, css, scripts (comma-separated or repeated; default none)"},
	}
}

// applyCrawlRequisiteFlags copies --page-requisites into cr
// (crawl.Validate checks the kinds).
func applyCrawlRequisiteFlags(cc *cli.Context, cr *crawl.Crawl) {
	cr.PageRequisites = append([]string(nil), cc.StringSlice("page-requisites")...)
}
