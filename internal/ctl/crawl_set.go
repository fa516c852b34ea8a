package ctl

import (
	"fmt"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// CrawlSetOptions are the flags of farroctl crawl set: nil leaves a
// value as it is.
type CrawlSetOptions struct {
	Name                    string
	MaxPages                *int64
	MaxPagesPerDomain       *int64
	MaxPagesPerRun          *int64
	MaxPagesPerDomainPerRun *int64
	MaxDepth                *int
}

// CrawlSet changes a crawl's budgets (0: unlimited) and raises its
// max_depth, in crawl.json under crawl.lock, which the frontier reads
// again within its poll interval and under the same lock before every
// release pass (the way pause and resume travel). A done crawl whose
// budgets changed starts a new run, so that a crawl that finished on a
// budget goes on (its domains held back by the budget release again); a
// paused one stays paused; a cancelled one refuses. max_depth may only be
// raised: it applies to the links found from then on (a link dropped as
// too deep before is not brought back).
func (c *Ctl) CrawlSet(o CrawlSetOptions) (err error) {
	defer c.auditDone(&err, "crawl set", o.Name, "")
	budgets := []struct {
		flag string
		v    *int64
		get  func(*crawl.Crawl) *int64
	}{
		{"max-pages", o.MaxPages, func(c *crawl.Crawl) *int64 { return &c.MaxPages }},
		{"max-pages-per-domain", o.MaxPagesPerDomain, func(c *crawl.Crawl) *int64 { return &c.MaxPagesPerDomain }},
		{"max-pages-per-run", o.MaxPagesPerRun, func(c *crawl.Crawl) *int64 { return &c.MaxPagesPerRun }},
		{"max-pages-per-domain-per-run", o.MaxPagesPerDomainPerRun, func(c *crawl.Crawl) *int64 { return &c.MaxPagesPerDomainPerRun }},
	}
	given := o.MaxDepth != nil
	for _, b := range budgets {
		if b.v != nil {
			given = true
			if *b.v < 0 {
				return Usagef("crawl set --%s %d: must not be negative (0: unlimited)", b.flag, *b.v)
			}
		}
	}
	if !given {
		return Usagef("crawl set: nothing to set (--max-pages, --max-pages-per-domain, --max-pages-per-run, --max-pages-per-domain-per-run, --max-depth)")
	}
	if o.MaxDepth != nil && *o.MaxDepth < 0 {
		return Usagef("crawl set --max-depth %d: must not be negative", *o.MaxDepth)
	}
	_, st, _, err := c.crawlStore(o.Name)
	if err != nil {
		return err
	}
	var changes []string
	run := ""
	cr, err := st.Update(func(cr *crawl.Crawl) error {
		changes, run = changes[:0], ""
		if cr.State == crawl.Cancelled {
			return fmt.Errorf("crawl %s is cancelled: its budgets no longer matter", o.Name)
		}
		for _, b := range budgets {
			if b.v == nil {
				continue
			}
			if p := b.get(cr); *p != *b.v {
				changes = append(changes, fmt.Sprintf("%s %s -> %s", strings.ReplaceAll(b.flag, "-", "_"), budget(*p), budget(*b.v)))
				*p = *b.v
			}
		}
		if o.MaxDepth != nil && *o.MaxDepth != cr.MaxDepth {
			if *o.MaxDepth < cr.MaxDepth {
				return UsageError(fmt.Errorf("crawl set --max-depth %d: lower than the crawl's %d (URLs already queued deeper would still be fetched); only raising is supported", *o.MaxDepth, cr.MaxDepth))
			}
			changes = append(changes, fmt.Sprintf("max_depth %d -> %d", cr.MaxDepth, *o.MaxDepth))
			cr.MaxDepth = *o.MaxDepth
		}
		if len(changes) == 0 {
			return nil
		}
		if cr.State == crawl.Done {
			cr.StartRun(time.Now())
			run = "; done -> running"
		}
		return cr.Validate()
	})
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		fmt.Fprintf(c.Stdout, "%s: nothing changed\n", o.Name)
		return nil
	}
	switch {
	case run != "":
		run += fmt.Sprintf(" (run %d)", cr.Run)
	case cr.State == crawl.Paused:
		run = "; the crawl is paused: farroctl crawl resume starts a new run"
	}
	fmt.Fprintf(c.Stdout, "%s: %s%s\n", o.Name, strings.Join(changes, ", "), run)
	return nil
}

func budget(n int64) string {
	if n == 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}
