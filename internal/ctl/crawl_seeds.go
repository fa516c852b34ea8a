package ctl

import (
	"context"
	"fmt"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/urlnorm"
)

// CrawlAddSeedsOptions are the arguments of farroctl crawl add-seeds.
type CrawlAddSeedsOptions struct {
	Name     string
	URLs     []string
	Priority int
	Rank     int    // the seeds' rank (1 the best, 0 none)
	Source   string // where they came from
}

// CrawlAddSeeds adds seeds to a running, paused or done crawl: they join
// crawl.json's seeds (so they are in scope as the crawl's other seeds
// are: with scope host their hosts join the crawl, with domain their
// registrable domains, with prefix the URLs under them) and the frontier
// queues them as pending URLs (domains it did not know enter pending).
// Seeds already in crawl.json are skipped; a seed URL the frontier has
// seen is not queued twice. A done crawl starts a new run; a paused one
// stays paused; a cancelled one refuses.
func (c *Ctl) CrawlAddSeeds(o CrawlAddSeedsOptions) (err error) {
	defer c.auditDone(&err, "crawl add-seeds", o.Name, "")
	if len(o.URLs) == 0 {
		return Usagef("crawl add-seeds: want NAME URL...")
	}
	if err := checkRankSource(o.Rank, o.Source); err != nil {
		return err
	}
	_, st, cr, err := c.crawlStore(o.Name)
	if err != nil {
		return err
	}
	var seeds []crawl.Seed
	seen := map[string]bool{}
	for _, raw := range o.URLs {
		n, err := urlnorm.Normalize(raw, cr.Normalize.Options())
		if err != nil {
			return Usagef("seed %q: %v", raw, err)
		}
		if !seen[n] {
			seen[n] = true
			seeds = append(seeds, crawl.Seed{URL: n, Priority: o.Priority, Rank: o.Rank, Source: o.Source})
		}
	}
	probe := *cr
	probe.Seeds = seeds
	if err := checkPrivateSeeds(context.Background(), &probe); err != nil {
		return err
	}
	var added []crawl.Seed
	run := ""
	cr, err = st.Update(func(cr *crawl.Crawl) error {
		if cr.State == crawl.Cancelled {
			return fmt.Errorf("crawl %s is cancelled: nothing of it is released again", o.Name)
		}
		have := map[string]bool{}
		for _, s := range cr.Seeds {
			have[s.URL] = true
		}
		added = added[:0]
		for _, s := range seeds {
			if !have[s.URL] {
				added = append(added, s)
			}
		}
		if len(added) == 0 {
			return nil
		}
		cr.Seeds = append(cr.Seeds, added...)
		if err := cr.Validate(); err != nil {
			return UsageError(err)
		}
		// Written under crawl.lock, before a done crawl is resumed: the
		// frontier declares a crawl done under the same lock after
		// reading every request (as crawl retry).
		if _, err := st.PutRequest(crawl.Request{Op: crawl.OpAddSeeds, Actor: Actor, Seeds: added}); err != nil {
			return err
		}
		if cr.State == crawl.Done {
			cr.StartRun(time.Now())
			run = "; done -> running"
		}
		return nil
	})
	if err != nil {
		return err
	}
	skipped := len(seeds) - len(added)
	if len(added) == 0 {
		fmt.Fprintf(c.Stdout, "%s: nothing added (%d already seeds)\n", o.Name, skipped)
		return nil
	}
	if run != "" {
		run += fmt.Sprintf(" (run %d)", cr.Run)
	}
	if cr.State == crawl.Paused {
		run = "; the crawl is paused: they are released after farroctl crawl resume"
	}
	fmt.Fprintf(c.Stdout, "%s: %d seed(s) added, %d already seeds; the frontier queues them%s\n", o.Name, len(added), skipped, run)
	return nil
}
