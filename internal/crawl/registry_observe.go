package crawl

import (
	"fmt"
	"time"
)

// What a crawl's domain means for the registry, and what the registry
// means for a crawl meeting a domain. The rules (docs/CRAWL.md, "The
// domain registry"):
//
//   - blocked and unreachable carry over with their cooldown; a domain
//     given up by one crawl (no retry planned) rests the crawl's
//     cooldown for its reason in the registry. A private_address refusal
//     is the crawl's own setting (--allow-private), not the domain's: it
//     is not carried over.
//   - exhausted carries over when the crawl fetched all it found of the
//     whole site (reason none or robots_denied, scope host or domain, no
//     URL filters); a crawl stopped by its budget or its max_depth, or
//     limited to a prefix or by filters, leaves the domain active (partly
//     crawled) in the registry.
//   - pending and active carry over as they are.

// RegistryStatus maps crawl c's domain d to the registry's status, reason
// and cooldown; ok false means the crawl's status says nothing about the
// domain as a whole (it is kept out of the registry's status).
func RegistryStatus(c *Crawl, d *Domain, now time.Time) (st DomainStatus, reason string, cooldown *time.Time, ok bool) {
	switch d.Status {
	case DomainBlocked, DomainUnreachable:
		if d.Reason == ReasonPrivateAddress || d.RegistryHold == d.Status {
			return "", "", nil, false
		}
		if d.NextCrawlAfter != nil {
			t := *d.NextCrawlAfter
			return d.Status, d.Reason, &t, true
		}
		cd := c.CooldownFor(d.Status, d.Reason)
		if cd <= 0 {
			cd = c.BlockCooldown.D()
		}
		t := now.Add(cd)
		return d.Status, d.Reason, &t, true
	case DomainExhausted:
		if d.RegistryHold == DomainExhausted || d.Reason == ReasonRegistryExhausted {
			return "", "", nil, false
		}
		whole := c.Scope != ScopePrefix && !c.Filters.narrows()
		if whole && (d.Reason == "" || d.Reason == ReasonRobotsDenied) {
			return DomainExhausted, d.Reason, nil, true
		}
		if d.PagesCrawled == 0 {
			return DomainPending, d.Reason, nil, true
		}
		return DomainActive, d.Reason, nil, true
	}
	return d.Status, d.Reason, nil, true
}

// narrows tells whether the filters leave out some of a site's URLs.
func (f *Filters) narrows() bool {
	return len(f.AcceptRegex)+len(f.RejectRegex)+len(f.AcceptPrefix)+len(f.RejectPrefix) > 0
}

// statusRank orders statuses for "the most restrictive wins" (migration).
func statusRank(e *RegistryEntry, now time.Time) int {
	switch {
	case e.CoolingDown(now):
		return 3
	case e.Status == DomainExhausted:
		return 2
	case e.Status == DomainActive:
		return 1
	}
	return 0
}

// Observe records crawl c's domain d in entry e (nil: a new entry, which
// is returned). Its counters always replace the crawl's earlier ones;
// with status (a transition of d, or the first write of a new entry) the
// registry's status follows d's, through the legal transitions: a
// blocked or unreachable entry whose cooldown is over counts as pending;
// an illegal change (another crawl's block still cooling down is never
// undone by a crawl that had the domain before) is refused with refused
// saying why, the counters still recorded.
func Observe(e *RegistryEntry, c *Crawl, d *Domain, status bool, now time.Time) (out *RegistryEntry, refused error) {
	if e == nil {
		e = &RegistryEntry{Domain: d.Domain, ParentDomain: d.ParentDomain, Status: DomainPending, FirstSeenAt: d.FirstSeenAt,
			StatusAt: now, Crawls: map[string]*RegistryCrawl{}}
		status = true
	}
	if e.FirstSeenAt.IsZero() || (!d.FirstSeenAt.IsZero() && d.FirstSeenAt.Before(e.FirstSeenAt)) {
		e.FirstSeenAt = d.FirstSeenAt
	}
	e.Crawls[c.Name] = &RegistryCrawl{Status: d.Status, Reason: d.Reason, PagesCrawled: d.PagesCrawled, PagesNew: d.PagesNew,
		Errors: int64(d.TotalErrorCount), UpdatedAt: now}
	if d.LastCrawledAt != nil && (e.LastCrawledAt == nil || d.LastCrawledAt.After(*e.LastCrawledAt)) {
		t := *d.LastCrawledAt
		e.LastCrawledAt = &t
	}
	e.UpdatedAt = now
	if !status {
		return e, nil
	}
	to, reason, cooldown, ok := RegistryStatus(c, d, now)
	if !ok {
		return e, nil
	}
	from := e.Status
	if (from == DomainBlocked || from == DomainUnreachable) && !e.CoolingDown(now) {
		from = DomainPending
	}
	if !CanTransitionDomain(from, to) {
		return e, fmt.Errorf("domain %s: %w in the registry: %s (%s, by %s) -> %s (crawl %s); kept %s", d.Domain, ErrIllegalDomainTransition,
			e.Status, e.Reason, e.StatusBy(), to, c.Name, e.Status)
	}
	if e.Status == to && e.Reason == reason && e.StatusCrawl == c.Name && sameTime(e.CooldownUntil, cooldown) {
		return e, nil
	}
	e.setStatus(to, reason, d.ReasonDetail, c.Name, "", cooldown, d.FirstBlockedAt, now)
	return e, nil
}

// setStatus records a new status of the entry, observed by crawl or by
// the check of source (one of the two) at now; firstBlocked, if not nil,
// is when the observer first found the domain blocked.
func (e *RegistryEntry) setStatus(to DomainStatus, reason, detail, crawl, source string, cooldown, firstBlocked *time.Time, now time.Time) {
	e.Status, e.Reason, e.ReasonDetail, e.StatusCrawl, e.StatusSource, e.StatusAt = to, reason, detail, crawl, source, now
	e.CooldownUntil = cooldown
	if (to == DomainBlocked || to == DomainUnreachable) && e.FirstBlockedAt == nil {
		t := now
		if firstBlocked != nil {
			t = *firstBlocked
		}
		e.FirstBlockedAt = &t
	}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// Reset puts the entry back to pending (farroctl domain reset): every
// crawl meeting the domain, or holding it for the registry, crawls it
// again.
func (e *RegistryEntry) Reset(detail string, now time.Time) {
	e.Status, e.Reason, e.ReasonDetail, e.StatusCrawl, e.StatusSource, e.StatusAt = DomainPending, ReasonReset, detail, "", "", now
	e.CooldownUntil, e.FirstBlockedAt = nil, nil
	e.UpdatedAt = now
}

// Adopt gives a domain a crawl has just met its starting state from the
// registry: blocked or unreachable while the cooldown lasts (not fetched
// before it ends), exhausted when another crawl finished it (its URLs
// are queued but held: not fetched until a reset), pending otherwise. It
// returns whether d took a state from the registry.
func Adopt(e *RegistryEntry, d *Domain, now time.Time) bool {
	if e == nil {
		return false
	}
	by := e.StatusBy()
	switch {
	case e.CoolingDown(now):
		t := *e.CooldownUntil
		d.Status, d.Reason = e.Status, e.Reason
		d.ReasonDetail = fmt.Sprintf("from the domain registry: %s by %s at %s; not fetched before %s", e.Status, by,
			e.StatusAt.UTC().Format(time.RFC3339), t.UTC().Format(time.RFC3339))
		d.NextCrawlAfter = &t
		if e.FirstBlockedAt != nil {
			fb := *e.FirstBlockedAt
			d.FirstBlockedAt = &fb
		}
		d.RegistryHold = e.Status
		return true
	case e.Status == DomainExhausted:
		d.Status, d.Reason = DomainExhausted, ReasonRegistryExhausted
		d.ReasonDetail = fmt.Sprintf("from the domain registry: exhausted by %s at %s; not crawled again (farroctl domain reset to crawl it)", by,
			e.StatusAt.UTC().Format(time.RFC3339))
		d.RegistryHold = DomainExhausted
		return true
	}
	return false
}

// Held tells whether a crawl holds d's URLs for the registry (exhausted
// by another crawl).
func (d *Domain) Held() bool { return d.Status == DomainExhausted && d.RegistryHold == DomainExhausted }

// Releases tells whether the registry no longer holds a domain a crawl
// adopted in status hold: it was reset, or another crawl is crawling it
// again (or its cooldown was cut short).
func (e *RegistryEntry) Releases(hold DomainStatus, now time.Time) bool {
	if e == nil {
		return true
	}
	switch hold {
	case DomainExhausted:
		return e.Status == DomainPending || e.Status == DomainActive
	case DomainBlocked, DomainUnreachable:
		return (e.Status == DomainPending || e.Status == DomainActive) && e.Reason == ReasonReset
	}
	return false
}
