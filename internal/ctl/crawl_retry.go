package ctl

import (
	"fmt"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// CrawlRetryOptions are the options of farroctl crawl retry.
type CrawlRetryOptions struct {
	Name   string
	States []string // last outcomes to take back: failed, killed (default both)
	Domain string   // only this domain (any form resolveDomain accepts)
}

// CrawlRetry puts a crawl's failed URLs (last outcome failed or killed)
// back in its frontier: a request the frontier applies (each URL queued
// again as a new job of its own). A done crawl starts a new run so that
// they are released; a paused one stays paused; a cancelled one refuses.
func (c *Ctl) CrawlRetry(o CrawlRetryOptions) (err error) {
	defer c.auditDone(&err, "crawl retry", o.Name, strings.Join(o.States, ","))
	states, err := retryStates(o.States)
	if err != nil {
		return err
	}
	_, st, cr, err := c.crawlStore(o.Name)
	if err != nil {
		return err
	}
	if cr.State == crawl.Cancelled {
		return fmt.Errorf("crawl %s is cancelled: nothing of it is released again", o.Name)
	}
	dn := ""
	if o.Domain != "" {
		if dn, _, err = resolveDomain(st, cr, o.Domain); err != nil {
			return err
		}
	}
	n := 0
	if err := st.FailedURLs(states, dn, func(*crawl.Outcome) { n++ }); err != nil {
		return err
	}
	where := ""
	if dn != "" {
		where = " of " + dn
	}
	if n == 0 {
		fmt.Fprintf(c.Stdout, "%s: no URL%s whose last outcome is %s; nothing to retry\n", o.Name, where, strings.Join(states, " or "))
		return nil
	}
	// The request is written under crawl.lock, before a done crawl is
	// resumed: the frontier declares a crawl done under the same lock after
	// reading every request, so the request is never stranded in a done
	// crawl.
	run := ""
	cr, err = st.Update(func(cr *crawl.Crawl) error {
		if cr.State == crawl.Cancelled {
			return fmt.Errorf("crawl %s is cancelled: nothing of it is released again", o.Name)
		}
		if _, err := st.PutRequest(crawl.Request{Op: crawl.OpRetry, Domain: dn, States: states, Actor: Actor}); err != nil {
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
	if cr.State == crawl.Running && run != "" {
		run += fmt.Sprintf(" (run %d)", cr.Run)
	}
	if cr.State == crawl.Paused {
		run = "; the crawl is paused: they are released after farroctl crawl resume"
	}
	fmt.Fprintf(c.Stdout, "%s: %d URL(s)%s (last outcome %s) queued again by the frontier%s\n", o.Name, n, where, strings.Join(states, " or "), run)
	return nil
}

// retryStates checks --state values: failed, killed (default both).
func retryStates(in []string) ([]string, error) {
	if len(in) == 0 {
		return append([]string(nil), crawl.RetryStates...), nil
	}
	var out []string
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			p = strings.TrimSpace(p)
			switch p {
			case crawl.OutcomeFailed, crawl.OutcomeKilled:
				out = append(out, p)
			default:
				return nil, Usagef("crawl retry: --state %q: want failed or killed", p)
			}
		}
	}
	return out, nil
}
