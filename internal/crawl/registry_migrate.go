package crawl

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// RegistryPlan is one entry a migration writes (or would write).
type RegistryPlan struct {
	Entry   *RegistryEntry
	Existed bool // the registry had an entry, merged into
}

// MigrateRegistry builds the domain registry from every crawl's domain
// files (a spool from before the registry): for each domain, every crawl
// that knows it is recorded with its counters, and the status is the most
// restrictive of the crawls' (a cooldown not over, then exhausted, then
// active, then pending), the latest among equals. An entry the registry
// has already is merged into by the same rule. With dryRun nothing is
// written. It returns the plan, sorted by domain; report, if not nil,
// hears of each unreadable file (skipped, never fatal).
func MigrateRegistry(s *job.Spool, dryRun bool, now time.Time, report func(error)) ([]RegistryPlan, error) {
	names, err := List(s)
	if err != nil {
		return nil, err
	}
	type obs struct {
		c *Crawl
		d *Domain
	}
	byDomain := map[string][]obs{}
	for _, n := range names {
		st, err := Open(s, n)
		if err != nil {
			continue
		}
		c, err := st.Load()
		if err != nil {
			if report != nil {
				report(fmt.Errorf("crawl %s skipped: %w", n, err))
			}
			continue
		}
		doms, err := st.Domains()
		if err != nil {
			if report != nil {
				report(fmt.Errorf("crawl %s skipped: %w", n, err))
			}
			continue
		}
		for _, d := range doms {
			byDomain[d.Domain] = append(byDomain[d.Domain], obs{c, d})
		}
	}
	reg := OpenRegistry(s)
	plan := make([]RegistryPlan, 0, len(byDomain))
	doms := make([]string, 0, len(byDomain))
	for dn := range byDomain {
		doms = append(doms, dn)
	}
	sort.Strings(doms)
	for _, dn := range doms {
		old, err := reg.Load(dn)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			if errors.Is(err, ErrRegistrySchema) {
				if report != nil {
					report(err)
				}
				continue
			}
			if report != nil {
				report(err)
			}
			old = nil
		}
		e := mergeObservations(old, byDomain[dn], now, func(o obs) (*Crawl, *Domain) { return o.c, o.d })
		plan = append(plan, RegistryPlan{Entry: e, Existed: old != nil})
	}
	if dryRun {
		return plan, nil
	}
	// Merged again under the writer lock, into the entry as it is then
	// (a frontier may have written it since the plan was made).
	plan = plan[:0]
	errs, err := reg.Update(doms, func(name string, cur *RegistryEntry) *RegistryEntry {
		e := mergeObservations(cur, byDomain[name], now, func(o obs) (*Crawl, *Domain) { return o.c, o.d })
		plan = append(plan, RegistryPlan{Entry: e, Existed: cur != nil})
		return e
	})
	if err != nil {
		return plan, err
	}
	for _, n := range doms {
		if e := errs[n]; e != nil && report != nil {
			report(e)
		}
	}
	return plan, reg.MarkBuilt(now)
}

// mergeObservations folds the crawls' views of one domain into old (nil:
// a new entry).
func mergeObservations[T any](old *RegistryEntry, obs []T, now time.Time, get func(T) (*Crawl, *Domain)) *RegistryEntry {
	sort.SliceStable(obs, func(i, j int) bool {
		_, a := get(obs[i])
		_, b := get(obs[j])
		return a.UpdatedAt.Before(b.UpdatedAt)
	})
	var best *RegistryEntry
	if old != nil {
		cp := *old
		best = &cp
	}
	e := old
	for _, o := range obs {
		c, d := get(o)
		// Each crawl's view alone, as if it were the only one...
		cand, _ := Observe(nil, c, d, true, now)
		cand.StatusAt = d.UpdatedAt
		// ...then kept if it is more restrictive, or as restrictive and
		// later, than the best so far.
		if best == nil || statusRank(cand, now) > statusRank(best, now) ||
			(statusRank(cand, now) == statusRank(best, now) && !cand.StatusAt.Before(best.StatusAt)) {
			best = cand
		}
		// Counters: every crawl's.
		e, _ = Observe(e, c, d, false, now)
		if e.Crawls[c.Name] != nil {
			e.Crawls[c.Name].UpdatedAt = d.UpdatedAt
		}
	}
	e.Status, e.Reason, e.ReasonDetail, e.StatusCrawl, e.StatusSource, e.StatusAt = best.Status, best.Reason, best.ReasonDetail, best.StatusCrawl, best.StatusSource, best.StatusAt
	e.CooldownUntil, e.FirstBlockedAt = best.CooldownUntil, best.FirstBlockedAt
	e.SchemaVersion = RegistrySchemaVersion
	e.sum()
	return e
}
