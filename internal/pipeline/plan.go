// Package pipeline is farro's content pipeline (seed 003, seed 004 phase
// D): it checks registered sources for change (source.check jobs, run by
// agentd), acquires the ones that changed by starting or refreshing their
// crawl through the crawl frontier, and refreshes exhausted domains of
// every crawl when they are due. One run (farroctl pipeline run) is an
// ordinary set of farro jobs and frontier requests, planned domain-fairly
// so that no site is hammered. See docs/PIPELINE.md.
package pipeline

import (
	"sort"
	"time"

	"github.com/farro-dev/farro/internal/source"
)

// Politeness limits of one run (seed 003's PipelinePoliteness).
type Politeness struct {
	// MaxSources caps the checks of a run (0: no cap).
	MaxSources int
	// MaxPerDomain caps the checks of one domain in a run (0: no cap).
	MaxPerDomain int
	// MinDomainInterval spaces the checks of one domain: the k-th check
	// of a domain in a run (k from 0) is not started before
	// run start + k * MinDomainInterval (its job's not_before).
	MinDomainInterval time.Duration
	// MaxDomainRequests and MaxRequests cap the requests of a run to one
	// domain and in all, checks and acquisitions together (budget.go; 0:
	// no cap).
	MaxDomainRequests int
	MaxRequests       int
}

// Defaults of seed 003.
const (
	DefaultMaxSources        = 20
	DefaultMaxPerDomain      = 3
	DefaultMinDomainInterval = 2 * time.Second
)

// Planned is one check of a run.
type Planned struct {
	Source    *source.Source
	Domain    string
	Slot      int       // its rank among this run's checks of its domain (0 first)
	NotBefore time.Time // run start + Slot * MinDomainInterval
}

// Plan is what a run checks, in order, and what it leaves.
type Plan struct {
	Queue []Planned
	// Left: sources due now and not checked in this run (over
	// MaxPerDomain or MaxSources), in the order the next run takes them.
	Left []*source.Source
	// NotDue: the sources whose next check is in the future.
	NotDue []*source.Source
}

// overdueLess orders the due sources of a domain: never checked first,
// then the longest overdue, then by name.
func overdueLess(a, b *source.Source) bool {
	switch {
	case a.NextCheckAfter == nil && b.NextCheckAfter != nil:
		return true
	case a.NextCheckAfter != nil && b.NextCheckAfter == nil:
		return false
	case a.NextCheckAfter != nil && !a.NextCheckAfter.Equal(*b.NextCheckAfter):
		return a.NextCheckAfter.Before(*b.NextCheckAfter)
	}
	return a.Name < b.Name
}

// MakePlan builds a run's queue with seed 003's staggered domain-fair
// algorithm: the sources due at now are grouped by domain, each group
// ordered most overdue first; the domains are ordered by their most
// overdue source (then name); the queue takes one source per domain per
// round, round robin, at most MaxPerDomain per domain and MaxSources in
// all. Everything else due stays due for the next run, which, since they
// are then the most overdue, takes them first.
func MakePlan(srcs []*source.Source, p Politeness, now time.Time) Plan {
	var plan Plan
	groups := map[string][]*source.Source{}
	for _, s := range srcs {
		if !s.Due(now) {
			plan.NotDue = append(plan.NotDue, s)
			continue
		}
		groups[s.Domain] = append(groups[s.Domain], s)
	}
	domains := make([]string, 0, len(groups))
	for d, g := range groups {
		sort.Slice(g, func(i, j int) bool { return overdueLess(g[i], g[j]) })
		domains = append(domains, d)
	}
	sort.Slice(domains, func(i, j int) bool {
		a, b := groups[domains[i]][0], groups[domains[j]][0]
		if overdueLess(a, b) != overdueLess(b, a) {
			return overdueLess(a, b)
		}
		return domains[i] < domains[j]
	})
	taken := map[string]int{}
	full := func() bool { return p.MaxSources > 0 && len(plan.Queue) >= p.MaxSources }
	for progress := true; progress && !full(); {
		progress = false
		for _, d := range domains {
			if full() {
				break
			}
			n := taken[d]
			if n >= len(groups[d]) || (p.MaxPerDomain > 0 && n >= p.MaxPerDomain) {
				continue
			}
			plan.Queue = append(plan.Queue, Planned{
				Source: groups[d][n], Domain: d, Slot: n, NotBefore: now.Add(time.Duration(n) * p.MinDomainInterval),
			})
			taken[d] = n + 1
			progress = true
		}
	}
	// What is left, in the order the next run would take it (the same
	// round robin over what remains).
	for round := 0; ; round++ {
		added := false
		for _, d := range domains {
			if i := taken[d] + round; i < len(groups[d]) {
				plan.Left = append(plan.Left, groups[d][i])
				added = true
			}
		}
		if !added {
			break
		}
	}
	sort.Slice(plan.NotDue, func(i, j int) bool { return overdueLess(plan.NotDue[i], plan.NotDue[j]) })
	return plan
}
