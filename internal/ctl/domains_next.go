package ctl

import (
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/job"
)

// nextColumn is the NEXT column of the domain table: when the domain may
// release again. Only a running crawl releases anything, so in a paused,
// done or cancelled crawl a domain with URLs pending says which (paused,
// done, cancelled) instead of "now"; a domain held back by a budget says
// "over budget" (raised with farroctl crawl set).
func nextColumn(r *DomainSummary, now time.Time) string {
	switch {
	case r.GaveUp:
		return "never (gave up)"
	case r.Status == crawl.DomainExhausted && r.Reason == crawl.ReasonRegistryExhausted && r.Pending > 0:
		return "held (registry)" // exhausted by another crawl: domain reset frees it
	case r.Pending == 0 && r.NextCrawlAfter != nil && r.NextCrawlAfter.After(now):
		return "after " + r.NextCrawlAfter.UTC().Format("2006-01-02 15:04:05")
	case r.Pending == 0:
		return "-"
	case r.Reason == crawl.ReasonBudget && r.Status != crawl.DomainBlocked && r.Status != crawl.DomainUnreachable:
		return "over budget"
	case r.CrawlState != "" && r.CrawlState != crawl.Running:
		return string(r.CrawlState)
	case r.NextCrawlAfter != nil && r.NextCrawlAfter.After(now):
		return "after " + r.NextCrawlAfter.UTC().Format("2006-01-02 15:04:05")
	case r.NextReleaseAt != nil && r.NextReleaseAt.After(now):
		return "at " + r.NextReleaseAt.UTC().Format("15:04:05.000")
	}
	return "now"
}

// Next is the NEXT column of the row at now (the dashboard's "next
// allowed request").
func (r *DomainSummary) Next(now time.Time) string { return nextColumn(r, now) }

// setCrawlStates fills the CrawlState of each row from its crawl's
// crawl.json (read once per crawl).
func setCrawlStates(s *job.Spool, rows []*DomainSummary) {
	states := map[string]crawl.State{}
	for _, r := range rows {
		stt, ok := states[r.Crawl]
		if !ok {
			if st, err := crawl.Open(s, r.Crawl); err == nil {
				if cr, err := st.Load(); err == nil {
					stt = cr.State
				}
			}
			states[r.Crawl] = stt
		}
		r.CrawlState = stt
	}
}
