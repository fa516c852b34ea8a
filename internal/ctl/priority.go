package ctl

import (
	"encoding/json"
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/farro-dev/farro/internal/crawl"
)

// DomainPriority is one row of farroctl domains --by priority: the
// domain and its seed 004 section 6.2 score, computed now.
type DomainPriority struct {
	Crawl  string             `json:"crawl"`
	Domain string             `json:"domain"`
	Status crawl.DomainStatus `json:"status"`
	Round  int                `json:"round"`
	// Pages fetched with a response, and those whose content was new
	// (the yield rate is their ratio).
	PagesCrawled int64  `json:"pages_crawled"`
	PagesNew     int64  `json:"pages_new"`
	Source       string `json:"source,omitempty"`
	crawl.Priority
	DomainImages // images.go
	d            *crawl.Domain
}

// domainsBy prints the domains ordered by priority score, highest first
// (blocked and unreachable domains, which have no score, last).
func (c *Ctl) domainsBy(o DomainsOptions) error {
	if o.By != "priority" && o.By != "yield" {
		return Usagef("domains --by %q: want priority or yield", o.By)
	}
	want, s, names, err := c.domainsScope(o)
	if err != nil {
		return err
	}
	now := c.now()
	var rows []DomainPriority
	images := &imageYield{s: s} // images.go: the yield term of a crawl that fetches images
	if err := eachDomain(s, names, want, func(n string, d *crawl.Domain) {
		rows = append(rows, DomainPriority{Crawl: n, Domain: d.Domain, Status: d.Status, Round: d.Round,
			PagesCrawled: d.PagesCrawled, PagesNew: d.PagesNew, Source: d.Source, Priority: crawl.PriorityFor(d, now, images.of(n)),
			DomainImages: domainImages(d), d: d})
	}); err != nil {
		return err
	}
	if o.By == "yield" {
		sortByYield(rows) // domains_list.go
	} else {
		sortByPriority(rows)
	}
	rows = rows[:limitOf(len(rows), o.Limit)]
	if o.JSON {
		enc := json.NewEncoder(c.Stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	if o.By == "yield" {
		return printYield(c.Stdout, rows)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CRAWL\tDOMAIN\tSTATUS\tSCORE\tRANK\tYIELD\tREMAINING\tERROR RATE\tSTALE DAYS\tROUND")
	for _, r := range rows {
		score := "-"
		if r.Scored {
			score = fmt.Sprint(r.Score)
		}
		rank := "-"
		if r.SeedRank > 0 {
			rank = fmt.Sprint(r.SeedRank)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t%d\t%.2f\t%.1f\t%d\n", r.Crawl, r.Domain, r.Status, score, rank, r.YieldRate, r.Remaining, r.ErrorRate, r.StalenessDays, r.Round)
	}
	return tw.Flush()
}

// sortByPriority puts the rows in the frontier's release order
// (crawl.CandidateLess: active first, then the higher score, then the
// least recently crawled), domains without a score last.
func sortByPriority(rows []DomainPriority) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if less, ok := crawl.CandidateLess(a.d, b.d, a.Priority, b.Priority); ok {
			return less
		}
		if a.Crawl != b.Crawl {
			return a.Crawl < b.Crawl
		}
		return a.Domain < b.Domain
	})
}
