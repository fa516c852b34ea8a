package frontier

import (
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// refusedPrivate ingests a request the SSRF guard refused (a private,
// loopback or link-local address in a crawl without allow_private), be it
// the domain's robots.txt or one of its URLs. Every request to the domain
// would be refused the same way, so the domain is given up at once
// (blocked, private_address, no cooldown): its queue stays as it is and
// a crawl with nothing else left is done instead of waiting on a
// cooldown. The detail names the flag that would allow it.
func (d *driver) refusedPrivate(dm *dom, msg string, now time.Time) {
	dd := dm.d
	// Past the retries, whatever the domain took before.
	dd.Cooldowns = d.cfg.MaxDomainRetries
	d.block(dm, crawl.DomainBlocked, crawl.ReasonPrivateAddress,
		firstLine(msg, 200)+" (start a crawl with --allow-private to crawl it)", 0, now)
}
