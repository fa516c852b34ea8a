package frontier

import (
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/job"
)

// The outage policy (docs/CRAWL.md, "Outages"). A crawl.fetch job makes
// one attempt (release.go); the frontier decides what a failed one means:
//
//   - a network failure or a 5xx answer counts toward its domain's health
//     at once (unreachable_threshold, block_threshold) and pushes the
//     domain's next request back by crawl.RetryDelay of the domain's
//     error streak (or by Retry-After, if longer);
//   - the URL goes back to its queue as a new job (crawl.RetryJobID), so
//     the spool's refusal of a duplicate ID still guards every try;
//   - the attempt counts against the URL (max_attempts) only while its
//     domain is not judged down: when the failure makes (or finds) the
//     domain unreachable or blocked, it is the weather, the URL stays
//     pending with no failure held against it and is released again when
//     the cooldown ends or the domain is reset.
//
// Crash safety is the discoveries': the entry is appended and fsynced
// before the domain entity that drops the finished flight is written; a
// frontier that dies in between ingests the job again and appends the same
// try again, whose release the spool refuses as a duplicate.

// stopped tells whether a job was stopped on purpose (crawl cancelled,
// killed or cancelled by an operator): never tried again.
func (d *driver) stopped(j *job.Job) bool {
	if d.cfg.State == crawl.Cancelled {
		return true
	}
	if j == nil {
		return false
	}
	return strings.HasPrefix(j.Reason, job.ReasonCancelled) || strings.HasPrefix(j.Reason, job.ReasonKilled)
}

// judged tells whether the domain is resting (unreachable or blocked).
func judged(dd *crawl.Domain) bool {
	return dd.Status == crawl.DomainUnreachable || dd.Status == crawl.DomainBlocked
}

// retryServerError queues a 5xx answer's URL again unless it is out of
// attempts (then it is ingested as the page it is).
func (d *driver) retryServerError(dm *dom, fl *crawl.Flight, art *crawl.Artifact, now time.Time) bool {
	if art.HTTPStatus < 500 {
		return false
	}
	ra := time.Duration(art.RetryAfter * float64(time.Second))
	return d.retryFailure(dm, fl, statusKey(art.HTTPStatus), true, ra, now)
}

// retryFailure queues fl's URL again after a failed attempt, or returns
// false when the URL is out of attempts. schedule: the failure is the
// domain's (not a crashed agent's) and pushes the domain back.
func (d *driver) retryFailure(dm *dom, fl *crawl.Flight, cause string, schedule bool, retryAfter time.Duration, now time.Time) bool {
	dd := dm.d
	failures := fl.Failures + 1
	if judged(dd) {
		failures = 0 // the domain is down: weather, not the URL's fault
	}
	if failures >= d.cfg.URLAttempts() {
		return false
	}
	var wait time.Duration
	if schedule && !judged(dd) {
		streak := max(dd.ConsecutiveErrorCount, dd.ConsecutiveNetErrorCount, 1)
		wait = crawl.RetryDelay(d.cfg.RetryBackoffD(), d.cfg.RetryBackoffMaxD(), streak, d.f.cfg.Rand)
		wait = max(wait, min(retryAfter, maxRetryAfter))
		t := now.Add(wait)
		if dd.NextCrawlAfter == nil || dd.NextCrawlAfter.Before(t) {
			dd.NextCrawlAfter = &t
		}
	}
	d.requeue(dm, crawl.Entry{URL: fl.URL, Depth: fl.Depth, Priority: fl.Priority, Hops: fl.Hops, From: fl.From,
		At: now, Round: dd.Round, Try: fl.Try + 1, Failures: failures, ETag: fl.ETag, LastModified: fl.LastModified, PrevSHA256: fl.PrevSHA256, Known: fl.Known, RequisiteRef: fl.RequisiteRef})
	d.log.Info().Str("domain", dd.Domain).Str("url", fl.URL).Str("job_id", fl.ID).Str("cause", cause).
		Int("try", fl.Try+1).Int("url_failures", failures).Str("domain_status", string(dd.Status)).
		Int64("wait_ms", wait.Milliseconds()).Msg("fetch to be tried again")
	return true
}

// requeue appends e to its domain's queue (flushed, fsynced, with the
// step's discoveries).
func (d *driver) requeue(dm *dom, e crawl.Entry) {
	dd := dm.d
	seg := dd.Segment(e.Depth, e.Priority)
	key := segKey{dd.Domain, seg.File}
	d.appends[key] = append(d.appends[key], e)
	if dd.Status == crawl.DomainExhausted {
		d.transition(dm, crawl.DomainActive, "", "")
	}
	d.dirty[dd.Domain] = true
}

// retryRequest applies farroctl crawl retry: every URL whose last outcome
// is one of r.States (of r.Domain, if set) goes back to its domain's
// queue as a new try. A domain that gave up stays so (farroctl domain
// reset wakes it); its URLs wait in its queue meanwhile.
func (d *driver) retryRequest(r *crawl.Request, now time.Time) {
	states := r.States
	if len(states) == 0 {
		states = crawl.RetryStates
	}
	n := 0
	err := d.st.FailedURLs(states, r.Domain, func(o *crawl.Outcome) {
		dm := d.get(o.Domain)
		if dm == nil {
			return
		}
		d.requeue(dm, crawl.Entry{URL: o.URL, Depth: o.Depth, At: now, Round: dm.d.Round, Try: crawl.TryOf(o.JobID) + 1, RequisiteRef: o.RequisiteRef})
		d.refreshWork(dm)
		n++
	})
	if err != nil {
		d.log.Error().Err(err).Msg("crawl retry: cannot read the outcomes; request dropped")
		return
	}
	d.log.Info().Str("requested_by", r.Actor).Str("domain", r.Domain).Strs("states", states).Int("urls", n).Msg("failed URLs queued again by operator")
}
