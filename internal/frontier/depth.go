package frontier

import (
	"fmt"

	"github.com/farro-dev/farro/internal/crawl"
)

// A domain whose URLs left are all beyond the crawl's max_depth ends
// exhausted with reason crawl_depth_reached (not ""): the crawl stopped
// at its depth limit, not at the end of the site. Each domain counts its
// URLs found only too deep (LinksTooDeep): a URL is counted when its key
// first enters the deep/ set while not in the seen-set, and uncounted
// when it is queued after all (found again at a lower depth).

// tooDeep counts a URL dropped beyond max_depth, new to the deep/ set,
// toward its domain (if the domain is known: a domain only ever found
// too deep has nothing pending and no entity).
func (d *driver) tooDeep(u string, k uint64) {
	if seen, _ := d.seen.Has(k); seen {
		return // queued before at a lower depth
	}
	name, _, err := crawl.DomainOf(u)
	if err != nil {
		return
	}
	if dm := d.get(name); dm != nil {
		dm.d.LinksTooDeep++
		d.dirty[name] = true
	}
}

// shallower uncounts a URL queued whose key is in the deep/ set.
func (d *driver) shallower(dm *dom, k uint64) {
	if dm.d.LinksTooDeep == 0 {
		return
	}
	if has, _ := d.deep.Has(k); has {
		dm.d.LinksTooDeep--
	}
}

// settleExhausted gives a domain with nothing pending and nothing in
// flight its end: exhausted, with reason robots_denied (every URL was
// disallowed), crawl_depth_reached (URLs remain beyond max_depth) or
// none. An exhausted domain's reason follows its depth count.
func (d *driver) settleExhausted(dm *dom) {
	dd := dm.d
	reason, detail := "", ""
	switch {
	case dd.PagesCrawled == 0 && dd.RobotsDenied > 0:
		reason = crawl.ReasonRobotsDenied
	case dd.LinksTooDeep > 0:
		reason = crawl.ReasonCrawlDepthReached
		detail = fmt.Sprintf("%d URLs found beyond max_depth (%d) only", dd.LinksTooDeep, d.cfg.MaxDepth)
	}
	switch dd.Status {
	case crawl.DomainPending, crawl.DomainActive:
		d.transition(dm, crawl.DomainExhausted, reason, detail)
	case crawl.DomainExhausted:
		if (dd.Reason == "" || dd.Reason == crawl.ReasonCrawlDepthReached) && (reason == "" || reason == crawl.ReasonCrawlDepthReached) {
			if dd.Reason != reason || dd.ReasonDetail != detail {
				d.transition(dm, crawl.DomainExhausted, reason, detail)
				dd.ReasonDetail = detail
			}
		}
	}
}
