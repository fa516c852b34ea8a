package pipeline

import (
	"errors"
	"fmt"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/fetch"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/internal/urlnorm"
	"github.com/farro-dev/farro/pkg/job"
)

// Source checks and acquisitions share the spool's domain registry
// (internal/crawl, registry.go and registry_check.go) with the crawls:
//
//   - before a check makes a request (its robots.txt fetch included), it
//     reads the entry of the source's domain: a domain blocked or
//     unreachable whose cooldown is not over is not requested; the check
//     is deferred to the cooldown's end (the source's next_check_after,
//     plus its jitter, and its "deferred" saying why) and makes no
//     request, so that what a crawl found (a login wall, 403s) stops the
//     monitor too;
//   - after the request, its outcome is written back (crawl.ObserveCheck):
//     403/429/5xx streaks, login walls and outages block the domain for
//     every crawl and check by the crawl's rules and cooldowns;
//   - an acquisition of a source whose domain the registry defers waits
//     (acquire_pending kept), and a refresh is not asked of a domain the
//     registry defers.
//
// A registry entry that cannot be read (hostile, corrupt, newer schema)
// defers nothing (a corrupt one is moved to corrupt/ by the registry);
// a write that fails (the writer lock held too long, a full disk) is
// reported in the check's result, never fails the check.

// ErrCodeLoginWall is a check's error code when the answer is a login
// wall (a redirect to a login page, a page with a password form: the
// crawl's heuristics, internal/fetch/loginwall.go): a failed check,
// whatever the status.
const ErrCodeLoginWall = crawl.ReasonLoginRequired

// RegistryLockWait bounds a check's wait for the registry's writer lock.
const RegistryLockWait = 2 * time.Second

// registryDefers says why the registry forbids a request to domain at
// now ("" when nothing does), and until when.
func registryDefers(sp *job.Spool, domain string, now time.Time) (string, time.Time) {
	e, err := crawl.OpenRegistry(sp).Load(domain)
	if err != nil {
		return "", time.Time{}
	}
	why := crawl.RegistryDefers(e, now)
	if why == "" {
		return "", time.Time{}
	}
	return why, *e.CooldownUntil
}

// crawlRules is the configuration a check of src is judged by: its
// crawl's, or the defaults its crawl will have.
func crawlRules(sp *job.Spool, src *source.Source) *crawl.Crawl {
	if st, err := crawl.Open(sp, src.Crawl); err == nil && st.Exists() {
		if c, err := st.Load(); err == nil {
			return c
		}
	}
	return CrawlFor(src)
}

// observe writes a check's observation of src's domain back to the
// registry; the error (if any) is for the check's result.
func (h *CheckHandler) observe(src *source.Source, o crawl.CheckObservation) (verdict string, err error) {
	reg := crawl.OpenRegistry(h.Spool)
	reg.Wait = RegistryLockWait
	_, parent, _ := crawl.DomainOf(src.URL)
	c := crawlRules(h.Spool, src)
	var refused error
	errs, err := reg.Update([]string{src.Domain}, func(_ string, e *crawl.RegistryEntry) *crawl.RegistryEntry {
		var out *crawl.RegistryEntry
		out, verdict, refused = crawl.ObserveCheck(e, c, src.Domain, parent, o)
		return out
	})
	if err == nil {
		err = errs[src.Domain]
	}
	if err == nil {
		err = refused
	}
	if err != nil {
		return verdict, fmt.Errorf("domain registry: %w", err)
	}
	return verdict, nil
}

// observation is what the answer resp (or the error gerr) to a check of
// src says of its domain.
func observation(src *source.Source, resp fetch.GetResponse, gerr error, now time.Time) crawl.CheckObservation {
	o := crawl.CheckObservation{Source: src.Name, URL: src.URL, HTTPStatus: resp.Status, At: now}
	if gerr != nil && resp.Status == 0 {
		o.NetErrorCode, o.NetError = resp.ErrorCode, gerr.Error()
		if o.NetErrorCode == crawl.ErrCodePrivate {
			// The SSRF guard's refusal is the source's setting
			// (--allow-private), not the domain's: as for crawls.
			o.NetErrorCode = ""
		}
		return o
	}
	if loc := resp.Headers["Location"]; loc != "" && resp.Status >= 300 && resp.Status < 400 {
		if r, err := urlnorm.Resolve(src.URL, loc, urlnorm.Options{}); err == nil {
			o.RedirectTo = r
		}
	}
	o.LoginWall = fetch.LoginWallOf(src.URL, resp.Status, o.RedirectTo, resp.Headers["Content-Type"], resp.Body)
	return o
}

// deferCheck records a check the registry deferred: no request; the
// source's next check is the cooldown's end (plus its jitter).
func (h *CheckHandler) deferCheck(src *source.Source, res *CheckResult, why string, until time.Time) error {
	now := h.now()
	res.CheckedAt, res.Skipped = now, why
	s, err := source.Update(h.Spool, src.Name, now, func(s *source.Source) error {
		if s.DueStamp() != src.DueStamp() {
			return errCheckedMeanwhile
		}
		next := until
		if j := s.JitterBound(); j > 0 {
			next = next.Add(time.Duration(h.rnd(int64(j))))
		}
		s.NextCheckAfter, s.Deferred = &next, why
		return nil
	})
	if err != nil {
		if errors.Is(err, errCheckedMeanwhile) {
			res.Skipped = "checked meanwhile by another job"
			return nil
		}
		return err
	}
	res.NextCheckAfter, res.Failures = s.NextCheckAfter, s.ConsecutiveFailures
	if _, err := h.observe(src, crawl.CheckObservation{Source: src.Name, URL: src.URL, Deferred: true, At: now}); err != nil {
		res.RegistryError = err.Error()
	}
	return nil
}

// deferredDomains splits domains into those the registry lets a refresh
// request and those it defers (with why).
func deferredDomains(sp *job.Spool, domains []string, now time.Time) (ok []string, deferred map[string]string) {
	for _, d := range domains {
		if why, _ := registryDefers(sp, d, now); why != "" {
			if deferred == nil {
				deferred = map[string]string{}
			}
			deferred[d] = why
			continue
		}
		ok = append(ok, d)
	}
	return ok, deferred
}
