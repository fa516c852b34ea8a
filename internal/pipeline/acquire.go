package pipeline

import (
	"errors"
	"fmt"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/pkg/job"
)

// AcquireResult says what an acquisition did.
type AcquireResult struct {
	Source string `json:"source"`
	Crawl  string `json:"crawl"`
	// Action: "started" (the crawl was created), "refresh" (its domains
	// were asked to start a refresh round, and the crawl resumed if it was
	// paused or done), or "" (nothing pending).
	Action   string   `json:"action,omitempty"`
	Domains  []string `json:"domains,omitempty"` // refresh requested for these
	Resumed  bool     `json:"resumed,omitempty"`
	CrawlRun int      `json:"crawl_run,omitempty"`
	// Deferred says why the acquisition waits (its source stays
	// acquire_pending): the domain registry defers the source's domain
	// (registry.go). DomainsDeferred are the crawl's domains not asked
	// for a refresh, for the same reason.
	Deferred        string            `json:"deferred,omitempty"`
	DomainsDeferred map[string]string `json:"domains_deferred,omitempty"`
}

// CrawlFor is the crawl configuration that acquires src: its URL as the
// seed, its scope, depth and politeness, and its page budget per
// acquisition as the crawl's per-run budget (each acquisition after the
// first is a new run).
func CrawlFor(src *source.Source) *crawl.Crawl {
	c := crawl.New(src.Crawl)
	c.Seeds = []crawl.Seed{{URL: src.URL}}
	c.Scope, c.MaxDepth, c.MaxPagesPerRun = src.Scope, src.MaxDepth, src.MaxPages
	c.Delay, c.UserAgent, c.AllowPrivate = src.Delay, src.UserAgent, src.AllowPrivate
	c.Timeout = src.Timeout
	// A source is a page watched for change, not a site to discover:
	// its sitemaps would spend its budget elsewhere (docs/CRAWL.md).
	c.Sitemaps = false
	if len(src.Resolve) > 0 {
		c.Resolve = map[string]string{}
		for k, v := range src.Resolve {
			c.Resolve[k] = v
		}
	}
	return c
}

// Acquire acquires source name if its acquisition is pending: a first
// acquisition creates its crawl (the frontier, in managerd, drives it with
// all its politeness); a later one asks every domain of the crawl to
// start a refresh round (conditional requests with the last validators,
// so unchanged pages are recorded as unchanged and their bodies are not
// stored again) and resumes the crawl if it is paused or done. It holds
// the source's lock throughout, and every step is safe to repeat: an
// acquisition interrupted by a crash is completed by the next call.
func Acquire(sp *job.Spool, name string, now time.Time) (AcquireResult, error) {
	return AcquireWith(sp, name, now, RunBudget{})
}

// AcquireWith is Acquire within a pipeline run's budget (budget.go): the
// crawl's per-run budgets and delay are set from it, for its new crawl or
// for the new run a later acquisition starts.
func AcquireWith(sp *job.Spool, name string, now time.Time, b RunBudget) (AcquireResult, error) {
	res := AcquireResult{Source: name}
	l, err := source.Lock(sp, name)
	if err != nil {
		return res, err
	}
	defer l.Unlock()
	src, err := source.Load(sp, name)
	if err != nil {
		return res, err
	}
	res.Crawl = src.Crawl
	if !src.AcquirePending {
		return res, nil
	}
	if why, _ := registryDefers(sp, src.Domain, now); why != "" {
		res.Deferred = why
		return res, nil
	}
	st, err := crawl.Open(sp, src.Crawl)
	if err != nil {
		return res, err
	}
	if !st.Exists() {
		c := CrawlFor(src)
		b.apply(c, src)
		if err := c.Validate(); err != nil {
			return res, fmt.Errorf("source %s: crawl configuration: %w", name, err)
		}
		switch err := st.Create(c); {
		case err == nil:
			res.Action, res.CrawlRun = "started", c.Run
		case errors.Is(err, crawl.ErrExists):
			// Created concurrently (or by an earlier attempt): refresh.
		default:
			return res, fmt.Errorf("source %s: create crawl: %w", name, err)
		}
	}
	if res.Action == "" {
		before := now
		if src.AcquirePendingSince != nil {
			before = *src.AcquirePendingSince
		}
		r, err := requestRefresh(st, nil, before, true, func(c *crawl.Crawl) { b.apply(c, src) })
		if err != nil {
			return res, fmt.Errorf("source %s: %w", name, err)
		}
		res.Action, res.Domains, res.Resumed, res.CrawlRun = "refresh", r.Domains, r.Resumed, r.Run
		res.DomainsDeferred = r.Deferred
	}
	if _, err := source.UpdateLocked(sp, name, now, func(s *source.Source) error {
		s.AcquirePending, s.AcquirePendingSince = false, nil
		t := now
		s.LastAcquiredAt = &t
		s.Acquisitions++
		return nil
	}); err != nil {
		return res, err
	}
	return res, nil
}

// RefreshResult says what RequestRefresh did.
type RefreshResult struct {
	Domains []string
	Resumed bool
	Run     int
	State   crawl.State
	// Deferred are the domains not asked, with why: the domain registry
	// defers them (a block's cooldown not over).
	Deferred map[string]string
}

// RequestRefresh asks the crawl's frontier to start a refresh round of
// the given domains (nil: every domain of the crawl) unless their round
// started at or after before, then resumes the crawl if it is done (and,
// with resumePaused, if it is paused: a source's crawl pauses when its
// per-acquisition budget is reached; an operator's pause is left alone). The requests are written before
// the crawl is resumed, under crawl.lock: the frontier only declares a
// crawl done under the same lock and after reading every request, so a
// request is never stranded in a done crawl. A domain the spool's domain
// registry defers (blocked or unreachable, cooldown not over) is not
// asked (RefreshResult.Deferred).
func RequestRefresh(st *crawl.Store, domains []string, before time.Time, resumePaused bool) (RefreshResult, error) {
	return requestRefresh(st, domains, before, resumePaused, nil)
}

// requestRefresh is RequestRefresh; edit, if not nil, changes the crawl
// in the write that resumes it (an acquisition's budgets).
func requestRefresh(st *crawl.Store, domains []string, before time.Time, resumePaused bool, edit func(c *crawl.Crawl)) (RefreshResult, error) {
	var res RefreshResult
	cr, err := st.Load()
	if err != nil {
		return res, err
	}
	if cr.State == crawl.Cancelled {
		return res, fmt.Errorf("crawl %s is cancelled: it cannot be refreshed (remove and add the source again, under a new name)", st.Name)
	}
	if domains == nil {
		doms, err := st.Domains()
		if err != nil {
			return res, fmt.Errorf("crawl %s: %w", st.Name, err)
		}
		for _, d := range doms {
			domains = append(domains, d.Domain)
		}
	}
	domains, res.Deferred = deferredDomains(st.Spool, domains, time.Now())
	if len(domains) == 0 && len(res.Deferred) > 0 {
		res.Run, res.State = cr.Run, cr.State // nothing to refresh: not resumed
		return res, nil
	}
	b := before.UTC()
	for _, d := range domains {
		if _, err := st.PutRequest(crawl.Request{Op: crawl.OpRefresh, Domain: d, Actor: Actor, Before: &b}); err != nil {
			return res, fmt.Errorf("crawl %s: refresh request for %s: %w", st.Name, d, err)
		}
	}
	res.Domains = domains
	c, err := st.Update(func(c *crawl.Crawl) error {
		if edit != nil && c.State != crawl.Cancelled {
			edit(c)
		}
		switch c.State {
		case crawl.Done, crawl.Paused:
			if c.State == crawl.Paused && !resumePaused {
				return nil
			}
			c.StartRun(time.Now())
			res.Resumed = true
		case crawl.Cancelled:
			return fmt.Errorf("crawl %s is cancelled", st.Name)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("crawl %s: resume: %w", st.Name, err)
	}
	res.Run, res.State = c.Run, c.State
	return res, nil
}
