package frontier

import (
	"fmt"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// settleBudget runs when a crawl is about to be done: a domain still
// active with URLs pending can only be held back by a budget (max_pages,
// max_pages_per_domain), so it ends exhausted with reason budget, as seed
// 004's state machine has it ("budget exhausted or max_pages hit":
// active -> exhausted), instead of reading active in a finished crawl.
// Its URLs stay queued: raising the budget (farroctl crawl set) resumes
// the crawl, and the domain's next release makes it active again
// (afterRelease). A pending domain (never fetched) stays pending. The
// domains are written before the crawl is marked done.
func (d *driver) settleBudget(now time.Time) {
	for _, s := range d.sums {
		if s.in.Status != crawl.DomainActive || s.in.Pending == 0 || s.inflight > 0 {
			continue
		}
		dm := d.get(s.name)
		if dm == nil {
			continue
		}
		dd := dm.d
		var detail string
		switch {
		case d.cfg.MaxPagesPerDomain > 0 && dd.PagesReleased >= d.cfg.MaxPagesPerDomain:
			detail = fmt.Sprintf("max_pages_per_domain (%d) reached", d.cfg.MaxPagesPerDomain)
		case d.cfg.MaxPages > 0 && d.totalReleased() >= d.cfg.MaxPages:
			detail = fmt.Sprintf("max_pages (%d) reached", d.cfg.MaxPages)
		default:
			continue
		}
		detail += fmt.Sprintf(" with %d URLs pending (farroctl crawl set raises it)", dd.Pending())
		d.transition(dm, crawl.DomainExhausted, crawl.ReasonBudget, detail)
		dd.UpdatedAt = now
	}
}
