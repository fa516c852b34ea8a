package pipeline

import (
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/source"
)

// Per-run caps (seed 003's max_domain_requests_per_run and
// max_total_requests_per_run): one pipeline run makes at most
// MaxDomainRequests requests to one domain and MaxRequests in all,
// counting its checks and the pages its acquisitions fetch (robots.txt
// and its sitemaps aside). The checks are planned within the caps
// (effective); what is left is shared among the acquisitions the run may
// make (the sources pending acquisition, and every check of a run that
// acquires), each getting its share as its crawl's per-run budgets
// (max_pages_per_run, max_pages_per_domain_per_run): a crawl pauses when
// its share is spent, and the next acquisition starts a new run. An
// acquisition whose share would be nothing waits for the next run.
// Requests to one domain are spaced MinDomainInterval apart, checks by
// their gate, acquisitions by their crawl's delay (raised to it).

// Defaults of seed 003.
const (
	DefaultMaxDomainRequests = 10
	DefaultMaxRequests       = 100
)

// RunBudget is what one acquisition of a run may spend.
type RunBudget struct {
	// MaxPages caps the URL jobs of the crawl's run; MaxPagesPerDomain
	// those of each of its domains (0: no cap).
	MaxPages          int64 `json:"max_pages,omitempty"`
	MaxPagesPerDomain int64 `json:"max_pages_per_domain,omitempty"`
	// Interval: the crawl's delay is raised to it.
	Interval crawl.Duration `json:"interval,omitempty"`
}

// apply sets c's per-run budgets and delay for an acquisition of src.
func (b RunBudget) apply(c *crawl.Crawl, src *source.Source) {
	c.MaxPagesPerRun = src.MaxPages
	if b.MaxPages > 0 && (c.MaxPagesPerRun == 0 || b.MaxPages < c.MaxPagesPerRun) {
		c.MaxPagesPerRun = b.MaxPages
	}
	c.MaxPagesPerDomainPerRun = b.MaxPagesPerDomain
	c.Delay = max(src.Delay, b.Interval)
}

// effective returns the politeness the checks are planned with: their
// caps lowered to the request caps.
func (p Politeness) effective() Politeness {
	if p.MaxRequests > 0 && (p.MaxSources == 0 || p.MaxRequests < p.MaxSources) {
		p.MaxSources = p.MaxRequests
	}
	if p.MaxDomainRequests > 0 && (p.MaxPerDomain == 0 || p.MaxDomainRequests < p.MaxPerDomain) {
		p.MaxPerDomain = p.MaxDomainRequests
	}
	return p
}

// budgeter shares a run's requests left after its checks among its
// possible acquisitions.
type budgeter struct {
	p        Politeness
	checks   int            // planned checks
	byDomain map[string]int // planned checks per domain
	acq      int            // possible acquisitions
	acqDom   map[string]int // possible acquisitions per domain
}

func newBudgeter(p Politeness, plan []Planned, pending []*source.Source, checksAcquire bool) *budgeter {
	b := &budgeter{p: p, byDomain: map[string]int{}, acqDom: map[string]int{}}
	for _, q := range plan {
		b.checks++
		b.byDomain[q.Domain]++
		if checksAcquire {
			b.acq++
			b.acqDom[q.Domain]++
		}
	}
	for _, s := range pending {
		b.acq++
		b.acqDom[s.Domain]++
	}
	return b
}

// share is the budget of one acquisition of a source of domain; ok is
// false when the caps leave it nothing.
func (b *budgeter) share(domain string) (RunBudget, bool) {
	r := RunBudget{Interval: crawl.Duration(b.p.MinDomainInterval)}
	if b.p.MaxRequests > 0 {
		r.MaxPages = int64((b.p.MaxRequests - b.checks) / max(b.acq, 1))
		if r.MaxPages <= 0 {
			return r, false
		}
	}
	if b.p.MaxDomainRequests > 0 {
		r.MaxPagesPerDomain = int64((b.p.MaxDomainRequests - b.byDomain[domain]) / max(b.acqDom[domain], 1))
		if r.MaxPagesPerDomain <= 0 {
			return r, false
		}
	}
	return r, true
}
