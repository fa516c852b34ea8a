package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/crawl/seenset"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// Why verdicts.
const (
	WhyInvalid      = "invalid"
	WhyOutOfScope   = "out_of_scope"
	WhyNeverSeen    = "never_seen"
	WhyTooDeep      = "too_deep"
	WhyRobots       = "robots_denied"
	WhyOverBudget   = "over_budget"
	WhyCoolingDown  = "cooling_down"
	WhyBlocked      = "blocked"
	WhyNotRunning   = "crawl_not_running"
	WhyWaitRobots   = "waiting_for_robots"
	WhyWaiting      = "waiting"
	WhyQueued       = "released"
	WhyInFlight     = "in_flight"
	WhyRetrying     = "retrying"
	WhyHeld         = "held"
	WhyDone         = "done"
	WhyKilled       = "killed"
	WhyUnaccounted  = "unaccounted"
	whyTimeLayout   = "2006-01-02T15:04:05.000Z07:00"
	whyQueueScanMax = 1 << 22
)

// WhyAnswer says why a URL is (or is not) being fetched.
type WhyAnswer struct {
	Crawl   string `json:"crawl"`
	Input   string `json:"input"`
	URL     string `json:"url,omitempty"` // normalized
	Domain  string `json:"domain,omitempty"`
	JobID   string `json:"job_id,omitempty"`
	Verdict string `json:"verdict"`
	Message string `json:"message"`
	// For waiting URLs: how many of the domain's queued URLs go first.
	Ahead *int64 `json:"ahead,omitempty"`
	Depth *int   `json:"depth,omitempty"`
}

// Why explains what the crawl did or will do with a URL.
func (c *Ctl) Why(name, rawURL string, jsonOut bool) error {
	s, st, cr, err := c.crawlStore(name)
	if err != nil {
		return err
	}
	a := why(spoolstore.New(s), st, cr, rawURL, c.now())
	if jsonOut {
		return json.NewEncoder(c.Stdout).Encode(a)
	}
	_, err = fmt.Fprintf(c.Stdout, "%s: %s\n", dash(a.URL), a.Message)
	return err
}

// why reaches the URL's jobs through the job store (jobs: the spool's,
// whose Dirs finds a job's directory and the fetch's result in it).
func why(jobs store.Dirs, st *crawl.Store, cr *crawl.Crawl, raw string, now time.Time) *WhyAnswer {
	a := &WhyAnswer{Crawl: cr.Name, Input: raw}
	u, err := cr.NormalizeURL(raw)
	if err != nil {
		a.Verdict, a.Message = WhyInvalid, "not a crawlable URL: "+err.Error()
		return a
	}
	a.URL = u
	a.Domain, _, _ = crawl.DomainOf(u)
	sc, err := crawl.NewScoper(cr)
	if err == nil {
		if ok, reason := sc.InScope(u); !ok {
			a.Verdict, a.Message = WhyOutOfScope, "out of scope: "+reason
			return a
		}
	}
	if filterWhy(a, cr, u) { // why_filter.go
		return a
	}
	k := crawl.URLKey(u)
	seen, _ := seenset.Contains(st.Path(crawl.SeenDir), k)
	if !seen {
		if deep, _ := seenset.Contains(st.Path(crawl.DeepDir), k); deep {
			a.Verdict, a.Message = WhyTooDeep, fmt.Sprintf("too deep: only found beyond max_depth %d", cr.MaxDepth)
			return a
		}
		a.Verdict, a.Message = WhyNeverSeen, "never seen: no fetched page links to it (yet)"
		return a
	}
	ctx := context.Background()
	id := latestFetchJob(ctx, jobs, cr.Name, u) // why_retry.go
	a.JobID = id
	if j, loc, err := jobs.GetDir(ctx, id, ""); loc.State != "" {
		if loc.State == job.Killed && requeuedWhy(a, st, cr, u, now) {
			return a
		}
		jobWhy(a, j, err, loc)
		return a
	}
	var last *crawl.Outcome
	_ = st.ScanOutcomes(func(o *crawl.Outcome) bool {
		if o.URL == u {
			oc := *o
			last = &oc
		}
		return true
	})
	if last != nil {
		switch last.Outcome {
		case crawl.OutcomeRobotsDenied:
			a.Verdict, a.Message = WhyRobots, "robots rule: "+last.Detail+" (dropped "+last.Time.Format(whyTimeLayout)+")"
		default:
			if outcomeWhy(a, last, id) { // why_filter.go
				break
			}
			a.Verdict = WhyDone
			a.Message = fmt.Sprintf("done: %s, http_status %d, at %s (job %s no longer in the spool)", last.Outcome, last.HTTPStatus, last.Time.Format(whyTimeLayout), id)
		}
		return a
	}
	waitingWhy(a, st, cr, u, now)
	return a
}

// jobWhy describes a URL whose job is in the spool: j as read at l (err:
// why it could not be).
func jobWhy(a *WhyAnswer, j *job.Job, err error, l job.Location) {
	if err != nil {
		a.Verdict, a.Message = WhyInFlight, fmt.Sprintf("released as job %s, in %s (unreadable: %v)", a.JobID, l.State, err)
		return
	}
	switch l.State {
	case job.Queued:
		a.Verdict, a.Message = WhyQueued, fmt.Sprintf("released at %s: queued in incoming/, waiting for an agent (job %s)", j.CreatedAt.Format(whyTimeLayout), j.ID)
	case job.InProgress:
		since := ""
		if j.StartedAt != nil {
			since = " since " + j.StartedAt.Format(whyTimeLayout)
		}
		a.Verdict, a.Message = WhyInFlight, fmt.Sprintf("in flight with agent %s%s (attempt %d, job %s)", l.Agent, since, j.Attempts, j.ID)
	case job.Deferred:
		nb := ""
		if j.NotBefore != nil {
			nb = ", next attempt not before " + j.NotBefore.Format(whyTimeLayout)
		}
		a.Verdict, a.Message = WhyRetrying, fmt.Sprintf("retrying after a network failure (attempt %d: %s)%s (job %s)", j.Attempts, oneLine(j.Error), nb, j.ID)
	case job.Failed, job.Stale:
		a.Verdict, a.Message = WhyRetrying, fmt.Sprintf("attempt %d %s (%s); managerd decides the next step (job %s)", j.Attempts, l.State, oneLine(firstNonEmpty(j.Error, j.Reason)), j.ID)
	case job.Held:
		a.Verdict, a.Message = WhyHeld, fmt.Sprintf("held by an operator (job %s; farroctl release %s)", j.ID, j.ID)
	case job.Succeeded:
		var art crawl.Artifact
		if crawl.ReadResult(l.Dir, &art) == nil {
			a.Depth = &art.Depth
			if artifactWhy(a, &art, j.ID) { // why_filter.go
				return
			}
			switch art.Outcome {
			case crawl.OutcomeRefused:
				a.Verdict, a.Message = WhyDone, fmt.Sprintf("done: refused by the fetcher at %s: %s (job %s)", art.FetchedAt.Format(whyTimeLayout), art.Error, j.ID)
			default:
				extra := ""
				if art.RedirectTo != "" {
					extra = ", redirects to " + art.RedirectTo
				}
				a.Verdict, a.Message = WhyDone, fmt.Sprintf("done: http_status %d, fetched at %s in %d ms, %d links%s (job %s)", art.HTTPStatus, art.FetchedAt.Format(whyTimeLayout), art.DurationMS, len(art.Links), extra, j.ID)
			}
			return
		}
		a.Verdict, a.Message = WhyDone, fmt.Sprintf("done at %s (job %s; no artifact)", j.UpdatedAt.Format(whyTimeLayout), j.ID)
	case job.Killed:
		a.Verdict, a.Message = WhyKilled, fmt.Sprintf("killed at %s: %s (attempts %d, job %s)", j.UpdatedAt.Format(whyTimeLayout), j.Reason, j.Attempts, j.ID)
	}
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// waitingWhy describes a URL that is queued for its domain, not released.
func waitingWhy(a *WhyAnswer, st *crawl.Store, cr *crawl.Crawl, u string, now time.Time) {
	d, err := st.LoadDomain(a.Domain)
	if err != nil {
		a.Verdict, a.Message = WhyUnaccounted, "seen, but its domain "+a.Domain+" has no entity yet (the frontier is writing it)"
		return
	}
	var ahead int64
	found := false
	var entry crawl.Entry
	for _, seg := range d.Queue {
		es, _, err := crawl.ReadEntries(filepath.Join(st.QueueDir(d.Domain), seg.File), seg.Offset, whyQueueScanMax)
		if err != nil {
			continue
		}
		for _, e := range es {
			if e.URL == u {
				found, entry = true, e
				break
			}
			ahead++
		}
		if found {
			break
		}
	}
	if !found {
		a.Verdict, a.Message = WhyUnaccounted, "seen, but neither queued, released nor finished: a duplicate of a URL the spool already had (job "+a.JobID+")"
		return
	}
	a.Ahead, a.Depth = &ahead, &entry.Depth
	var released int64
	doms, _ := st.Domains()
	for _, x := range doms {
		released += x.PagesReleased
	}
	switch {
	case cr.MaxPages > 0 && released >= cr.MaxPages:
		a.Verdict, a.Message = WhyOverBudget, fmt.Sprintf("over budget: max_pages %d reached", cr.MaxPages)
	case cr.MaxPagesPerDomain > 0 && d.PagesReleased >= cr.MaxPagesPerDomain:
		a.Verdict, a.Message = WhyOverBudget, fmt.Sprintf("over budget: max_pages_per_domain %d reached for %s", cr.MaxPagesPerDomain, d.Domain)
	case cr.MaxPagesPerDomainPerRun > 0 && d.Run == cr.Run && d.RunReleased >= cr.MaxPagesPerDomainPerRun:
		a.Verdict, a.Message = WhyOverBudget, fmt.Sprintf("over budget for this run: max_pages_per_domain_per_run %d reached for %s (resume starts a new run)", cr.MaxPagesPerDomainPerRun, d.Domain)
	case (d.Status == crawl.DomainBlocked || d.Status == crawl.DomainUnreachable) && d.NextCrawlAfter == nil:
		a.Verdict, a.Message = WhyBlocked, fmt.Sprintf("domain %s is %s (%s: %s) for the rest of this crawl; farroctl domain reset to retry", d.Domain, d.Status, d.Reason, d.ReasonDetail)
	case d.Held():
		a.Verdict, a.Message = WhyBlocked, fmt.Sprintf("domain %s is held: %s", d.Domain, d.ReasonDetail) // domain_registry.go
	case d.NextCrawlAfter != nil && d.NextCrawlAfter.After(now):
		a.Verdict, a.Message = WhyCoolingDown, fmt.Sprintf("domain %s cooling down until %s (%s %s); %d ahead of it", d.Domain, d.NextCrawlAfter.Format(whyTimeLayout), d.Status, d.Reason, ahead)
	case cr.State != crawl.Running:
		a.Verdict, a.Message = WhyNotRunning, fmt.Sprintf("queued (depth %d, %d ahead in %s), but the crawl is %s: nothing is released", entry.Depth, ahead, d.Domain, cr.State)
	default:
		origin, _ := crawl.Origin(u)
		if cr.ObeyRobots {
			rc := d.Robots[origin]
			if rc == nil || now.Sub(rc.FetchedAt) >= cr.RobotsTTL.D() {
				a.Verdict, a.Message = WhyWaitRobots, fmt.Sprintf("queued (depth %d, %d ahead); waiting for %s/robots.txt", entry.Depth, ahead, origin)
				return
			}
			if r, err := st.LoadRobots(rc.Verdict, rc.BodySHA256); err == nil {
				if ok, rule := r.Allowed(cr.UserAgent, crawl.RequestURI(u)); !ok {
					a.Verdict, a.Message = WhyRobots, "robots rule: "+crawl.DescribeRule(rule, rc.Verdict)+" in "+origin+"/robots.txt (will be dropped when its turn comes)"
					return
				}
			}
		}
		next := "now"
		if d.NextReleaseAt != nil && d.NextReleaseAt.After(now) {
			next = d.NextReleaseAt.Format(whyTimeLayout)
		}
		a.Verdict = WhyWaiting
		a.Message = fmt.Sprintf("waiting behind %d others in domain %s (depth %d; %d in flight of at most %d; next release not before %s; interval %.3gs)",
			ahead, d.Domain, entry.Depth, len(d.InFlight), cr.MaxInFlightPerDomain, next, d.IntervalSeconds)
	}
}
