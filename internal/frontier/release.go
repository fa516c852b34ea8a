package frontier

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sort"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/robots"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// maxSkipsPerRelease bounds the robots-denied entries one release may skip.
const maxSkipsPerRelease = 1000

// releasePass releases what may be released now: one URL per eligible
// domain per round, as long as budgets and the crawl's in-flight cap
// allow, the domains of a round in the candidate order (active first,
// then the higher priority score, then the least recently crawled:
// crawl.CandidateLessOf), round robin among equals (least recently served
// first). The order decides who gets the slots when a cap binds. A round
// visits only the domains whose time has come (domcache.go: the ready
// summaries with max(next_release_at, next_crawl_after) <= now), orders
// them by their summaries' scores and reads the entities of those it
// releases from, in that order, until a cap binds. It holds crawl.lock
// shared and re-reads the crawl's state under it, so that once farroctl
// has written paused or cancelled (exclusively), no release is under way
// and none will follow.
func (d *driver) releasePass(ctx context.Context, now time.Time) {
	d.syncDirty()
	if !d.anyDue(now) || d.globalCapReached() {
		return
	}
	l, err := d.st.LockConfig(true)
	if err != nil {
		d.log.Warn().Err(err).Msg("crawl.lock busy; releasing later")
		return
	}
	defer l.Unlock()
	// The pass stages its jobs and submits them together at its end, still
	// under crawl.lock (one SubmitMany: two barriers for the whole batch).
	defer d.flushReleases()
	cfg, stamp, err := d.loadConfig()
	if err != nil {
		d.log.Error().Err(err).Msg("crawl.json")
		return
	}
	if cfg.State != crawl.Running {
		_ = d.setConfig(cfg, stamp)
		return
	}
	if cfg.Run != d.cfg.Run || cfg.UpdatedAt != d.cfg.UpdatedAt {
		_ = d.setConfig(cfg, stamp)
	}
	type cand struct {
		s *summary
		p crawl.Priority
	}
	released := 0
	for round := 0; released < d.f.cfg.MaxReleasesPerStep && ctx.Err() == nil; round++ {
		due := d.due(now)
		if len(due) == 0 {
			return
		}
		cands := make([]cand, len(due))
		images := d.cfg.FetchesImages()
		for i, s := range due {
			cands[i] = cand{s, s.in.PriorityFor(now, images)}
		}
		sort.Slice(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			if less, ok := crawl.CandidateLessOf(a.s.in.Status, b.s.in.Status, a.s.in.LastCrawledAt, b.s.in.LastCrawledAt, a.p, b.p); ok {
				return less
			}
			if a.s.lastServed != b.s.lastServed {
				return a.s.lastServed < b.s.lastServed
			}
			return a.s.name < b.s.name
		})
		progress := false
		for _, c := range cands {
			if d.globalCapReached() || released >= d.f.cfg.MaxReleasesPerStep {
				return
			}
			dm := d.get(c.s.name)
			if dm == nil {
				continue
			}
			if !d.eligible(dm, now) {
				d.sync(dm)
				continue
			}
			if d.releaseOne(dm, now) {
				progress = true
				released++
				d.rr++
				c.s.lastServed = d.rr
			}
			d.sync(dm)
		}
		if !progress {
			return
		}
	}
}

// globalCapReached: the crawl-wide limits that stop every release.
func (d *driver) globalCapReached() bool {
	if len(d.inflight) >= d.cfg.MaxInFlight {
		return true
	}
	if d.cfg.MaxPages > 0 && d.totalReleased() >= d.cfg.MaxPages {
		return true
	}
	return d.runBudgetReached()
}

// eligible tells whether dm may release now. A blocked or unreachable
// domain whose cooldown is over goes back to pending here.
func (d *driver) eligible(dm *dom, now time.Time) bool {
	dd := dm.d
	if dd.Pending() == 0 || dd.Held() {
		return false
	}
	switch dd.Status {
	case crawl.DomainBlocked, crawl.DomainUnreachable:
		if dd.NextCrawlAfter == nil || now.Before(*dd.NextCrawlAfter) {
			return false
		}
		wasRobots := dd.Reason == crawl.ReasonRobotsUnavailable
		dd.NextCrawlAfter = nil
		dd.ConsecutiveErrorCount, dd.ConsecutiveNetErrorCount, dd.NetErrorsSince = 0, 0, nil
		dd.ConsecutiveLoginWalls = 0
		d.transition(dm, crawl.DomainPending, crawl.ReasonCooldownOver, "")
		if wasRobots {
			for o, rc := range dd.Robots {
				if rc.Verdict == crawl.RobotsDisallowAll {
					delete(dd.Robots, o)
					delete(dm.parsed, o)
				}
			}
		}
	}
	if dd.NextCrawlAfter != nil && now.Before(*dd.NextCrawlAfter) {
		return false
	}
	if len(dd.InFlight) >= d.cfg.MaxInFlightPerDomain {
		return false
	}
	if dd.NextReleaseAt != nil && now.Before(*dd.NextReleaseAt) {
		return false
	}
	if d.cfg.MaxPagesPerDomain > 0 && dd.PagesReleased >= d.cfg.MaxPagesPerDomain {
		if dd.Reason != crawl.ReasonBudget {
			dd.Reason, dd.ReasonDetail = crawl.ReasonBudget, "max_pages_per_domain reached"
			d.dirty[dd.Domain] = true
		}
		return false
	}
	if d.cfg.MaxPagesPerDomainPerRun > 0 && runReleased(dd, d.cfg.Run) >= d.cfg.MaxPagesPerDomainPerRun {
		return false
	}
	return true
}

// head returns the next entry of dm's queue (lowest depth, then highest
// priority, then discovery order), reading a few ahead.
func (d *driver) head(dm *dom) (crawl.Entry, *crawl.Segment, int64, bool) {
	for _, seg := range dm.d.Queue {
		if seg.Pending() <= 0 {
			continue
		}
		if dm.headFile != seg.File || dm.headOffset != seg.Offset || len(dm.head) == 0 {
			es, ends, err := crawl.ReadEntries(filepath.Join(d.st.QueueDir(dm.d.Domain), seg.File), seg.Offset, 16)
			if err != nil {
				d.log.Error().Err(err).Str("domain", dm.d.Domain).Msg("read queue")
				return crawl.Entry{}, nil, 0, false
			}
			if len(es) == 0 {
				// Counted but not on disk (should not happen): stop
				// counting them.
				d.log.Error().Str("domain", dm.d.Domain).Str("segment", seg.File).Int64("pending", seg.Pending()).Msg("queue segment shorter than counted")
				seg.Count = seg.Consumed
				d.dirty[dm.d.Domain] = true
				continue
			}
			dm.headFile, dm.headOffset, dm.head, dm.headEnds = seg.File, seg.Offset, es, ends
		}
		return dm.head[0], seg, dm.headEnds[0], true
	}
	return crawl.Entry{}, nil, 0, false
}

// consume advances past the head entry.
func (d *driver) consume(dm *dom, seg *crawl.Segment, end int64) {
	seg.Offset, seg.Consumed = end, seg.Consumed+1
	if len(dm.head) > 0 {
		dm.head, dm.headEnds = dm.head[1:], dm.headEnds[1:]
		dm.headOffset = end
	}
	d.dirty[dm.d.Domain] = true
}

// releaseOne releases dm's next URL, or the robots.txt it needs first. It
// returns whether a job was released.
func (d *driver) releaseOne(dm *dom, now time.Time) bool {
	dd := dm.d
	for skips := 0; skips < maxSkipsPerRelease; skips++ {
		e, seg, end, ok := d.head(dm)
		if !ok {
			return false
		}
		if e.URL == "" {
			d.consume(dm, seg, end)
			continue
		}
		origin, err := crawl.Origin(e.URL)
		if err != nil {
			d.consume(dm, seg, end)
			continue
		}
		var ref *crawl.RobotsRef
		if d.cfg.ObeyRobots {
			rc := dd.Robots[origin]
			if rc == nil || now.Sub(rc.FetchedAt) >= d.cfg.RobotsTTL.D() {
				if d.robotsInFlight(dd, origin) {
					return false
				}
				return d.releaseRobots(dm, origin, now)
			}
			r := dm.parsed[origin]
			if r == nil {
				pr, err := d.st.LoadRobots(rc.Verdict, rc.BodySHA256)
				if err != nil {
					d.log.Warn().Err(err).Str("origin", origin).Msg("stored robots.txt unreadable; fetching it again")
					delete(dd.Robots, origin)
					d.dirty[dd.Domain] = true
					return false
				}
				dm.parsed[origin], r = pr, pr
			}
			allowed, rule := r.Allowed(d.cfg.UserAgent, crawl.RequestURI(e.URL))
			if !allowed {
				d.consume(dm, seg, end)
				dd.RobotsDenied++
				d.outcomes = append(d.outcomes, crawl.Outcome{Time: now, URL: e.URL, Domain: dd.Domain, JobID: crawl.RoundJobID(d.st.Name, e.URL, dd.Round), Round: dd.Round,
					Depth: e.Depth, Referrer: crawl.BoundReferrer(e.From), Outcome: crawl.OutcomeRobotsDenied, Detail: crawl.DescribeRule(rule, rc.Verdict) + " in " + origin + "/robots.txt"})
				continue
			}
			ref = &crawl.RobotsRef{Origin: origin, Verdict: rc.Verdict, HTTPStatus: rc.HTTPStatus, BodySHA256: rc.BodySHA256}
		}
		if d.cfg.MaxPages > 0 && d.totalReleased() >= d.cfg.MaxPages {
			return false
		}
		if d.releasedAlready(dd, e) {
			d.consume(dm, seg, end)
			continue
		}
		released := d.releaseFetch(dm, e, seg, end, ref, now)
		if released && d.interval(dd) >= 500*time.Millisecond {
			// The next release is far: do not keep a read-ahead per
			// polite domain in memory.
			dm.head, dm.headEnds = nil, nil
		}
		return released
	}
	return false
}

func (d *driver) robotsInFlight(dd *crawl.Domain, origin string) bool {
	for _, fl := range dd.InFlight {
		if fl.Kind == crawl.KindRobots && fl.Origin == origin {
			return true
		}
	}
	return false
}

// releaseFetch submits the crawl.fetch job of entry e.
func (d *driver) releaseFetch(dm *dom, e crawl.Entry, seg *crawl.Segment, end int64, ref *crawl.RobotsRef, now time.Time) bool {
	dd := dm.d
	// A refresh round's jobs have their own IDs (the URL was released
	// in an earlier round); the entry's validators make it conditional.
	id := crawl.RetryJobID(d.st.Name, e.URL, dd.Round, e.Try)
	interval := d.interval(dd)
	p := crawl.FetchPrompt{
		Crawl: d.st.Name, URL: e.URL, Domain: dd.Domain, Depth: e.Depth, Hops: e.Hops, DiscoveredFrom: e.From,
		UserAgent: d.cfg.UserAgent, TimeoutMS: d.cfg.Timeout.D().Milliseconds(), ConnectTimeoutMS: d.cfg.ConnectTimeout.D().Milliseconds(),
		MaxBodyBytes: d.cfg.MaxBodyBytes, Resolve: d.cfg.Resolve, AllowPrivate: d.cfg.AllowPrivate,
		MinIntervalMS: interval.Milliseconds(), MaxInFlightPerDomain: d.cfg.MaxInFlightPerDomain, Robots: ref,
		Round: dd.Round, IfNoneMatch: e.ETag, IfModifiedSince: e.LastModified, PrevSHA256: e.PrevSHA256,
		FetchFilters: d.cfg.FetchFilters(),
		RequisiteRef: e.RequisiteRef, PageRequisites: d.cfg.PageRequisites,
	}
	if e.Requisite != "" {
		// A requisite is fetched whatever --content-types says (images.go).
		p.ContentTypes = nil
	}
	b, _ := json.Marshal(&p)
	req := d.request(id, crawl.KindFetch, e.Priority, b)
	// One attempt per job: the frontier retries (retry.go), so that each
	// failure counts toward the domain's health when it happens.
	req.MaxAttempts = 1
	d.stage(pendingRelease{req: req, dm: dm, entry: &e})
	d.consume(dm, seg, end)
	dd.InFlight = append(dd.InFlight, crawl.Flight{ID: id, Kind: crawl.KindFetch, URL: e.URL, ReleasedAt: now,
		Depth: e.Depth, Hops: e.Hops, Priority: e.Priority, From: crawl.BoundReferrer(e.From), Try: e.Try, Failures: e.Failures,
		ETag: e.ETag, LastModified: e.LastModified, PrevSHA256: e.PrevSHA256, Known: e.Known, RequisiteRef: e.RequisiteRef})
	d.inflight[id] = dd.Domain
	if e.Try > 0 {
		// A retry is no new page: budgets count URLs.
		d.afterRelease(dm, interval, now)
		return true
	}
	dd.PagesReleased++
	if dd.Run != d.cfg.Run {
		dd.Run, dd.RunReleased = d.cfg.Run, 0
	}
	dd.RunReleased++
	d.runReleasedTotal() // recounts if the run changed
	d.released++
	d.runReleased++
	d.afterRelease(dm, interval, now)
	return true
}

// releaseRobots submits the crawl.robots job of origin.
func (d *driver) releaseRobots(dm *dom, origin string, now time.Time) bool {
	dd := dm.d
	id := crawl.RobotsJobID(d.st.Name, origin, dd.RobotsFetches)
	interval := d.interval(dd)
	p := crawl.RobotsPrompt{
		Crawl: d.st.Name, Origin: origin, Domain: dd.Domain, UserAgent: d.cfg.UserAgent,
		TimeoutMS: d.cfg.Timeout.D().Milliseconds(), ConnectTimeoutMS: d.cfg.ConnectTimeout.D().Milliseconds(),
		MaxBytes: robots.MaxBytes, Resolve: d.cfg.Resolve, AllowPrivate: d.cfg.AllowPrivate, MinIntervalMS: interval.Milliseconds(),
		MaxInFlightPerDomain: d.cfg.MaxInFlightPerDomain, Sitemaps: d.cfg.Sitemaps, MaxCrawlDelayMS: d.cfg.MaxCrawlDelay.D().Milliseconds(),
	}
	b, _ := json.Marshal(&p)
	// Robots first: it is what the domain waits for.
	d.stage(pendingRelease{req: d.request(id, crawl.KindRobots, 1, b), dm: dm})
	dd.RobotsFetches++
	dd.InFlight = append(dd.InFlight, crawl.Flight{ID: id, Kind: crawl.KindRobots, URL: origin + "/robots.txt", Origin: origin, ReleasedAt: now})
	d.inflight[id] = dd.Domain
	d.afterRelease(dm, interval, now)
	return true
}

// pendingRelease is a job a release pass has counted as released but not
// yet submitted.
type pendingRelease struct {
	req   job.SubmitRequest
	dm    *dom
	entry *crawl.Entry // crawl.fetch: the queue entry, put back if the submit fails
}

func (d *driver) request(id, kind string, prio int, prompt []byte) job.SubmitRequest {
	return job.SubmitRequest{ID: id, Kind: kind, Priority: prio, MaxAttempts: d.cfg.MaxAttempts, Prompt: prompt, Actor: Actor}
}

// stage records a release; flushReleases submits it.
func (d *driver) stage(p pendingRelease) { d.pending = append(d.pending, p) }

// flushReleases submits the staged jobs in one batch: one Submit of the
// job store (on a spool, two barriers for the whole batch). A job of that ID
// that exists already was released before a crash: that counts as
// released (and, if it finished meanwhile, it is ingested by the next
// step). A release whose submit failed is undone: its flight is dropped,
// its counts are taken back and a page's URL goes back to its queue (a
// robots.txt is asked for again by the next release of its domain).
func (d *driver) flushReleases() {
	if len(d.pending) == 0 {
		return
	}
	reqs := make([]job.SubmitRequest, len(d.pending))
	for i, p := range d.pending {
		reqs[i] = p.req
	}
	_, errs := d.f.jobs.Submit(d.f.ctx, reqs)
	undone := false
	var again []pendingRelease // found finished: ingested already?
	for i, p := range d.pending {
		switch d.submitted(p.req.ID, errs[i]) {
		case releaseRefused:
			d.unrelease(p)
			undone = true
		case releaseFinished:
			if p.entry != nil {
				again = append(again, p)
			} else {
				d.finished[p.req.ID] = d.located[p.req.ID]
				delete(d.located, p.req.ID)
			}
		}
	}
	d.pending = d.pending[:0]
	d.settleFinished(again)
	if undone {
		// Back in their queues now, or the crawl could look finished.
		if err := d.flushAppends(); err != nil {
			d.log.Error().Err(err).Msg("cannot put refused releases back in their queues; retrying")
		}
	}
}

// What a submit of a release came to.
type releaseResult int

const (
	releaseSubmitted releaseResult = iota // a new job, or one already there and unfinished
	releaseRefused                        // no job: undo the release
	releaseFinished                       // a job already there and finished (d.located holds its state)
)

// submitted interprets one submit's outcome.
func (d *driver) submitted(id string, err error) releaseResult {
	if err == nil {
		return releaseSubmitted
	}
	if !errors.Is(err, job.ErrDuplicate) {
		if !errors.Is(err, store.ErrBusy) {
			d.log.Error().Err(err).Str("job_id", id).Msg("cannot release")
		}
		return releaseRefused
	}
	st, lerr := d.stateOf(id)
	if lerr != nil {
		// Refused because its lock is held, yet no such job: a submit
		// that died between taking the lock and moving the job in.
		// watchdogd removes such a lock; release it then.
		d.log.Warn().Err(err).Str("job_id", id).Msg("job lock held without a job; releasing later")
		return releaseRefused
	}
	d.log.Info().Str("job_id", id).Str("state", string(st)).Msg("released before a crash; recording it")
	if st.Terminal() {
		d.located[id] = st
		return releaseFinished
	}
	return releaseSubmitted
}

// settleFinished decides, for URL releases whose job was there already
// and finished, whether that job was ingested already: its outcome line
// is written (or waits in this step's d.outcomes). A queue can hold two
// entries of one job: a retry queued by an ingest whose domain file a
// crash cut off is queued again when the job is ingested again after the
// restart. The second release finds the job the first one made; if that
// job was ingested, ingesting it again would count its page twice, so the
// release is dropped (its flight and counts taken back, its entry stays
// consumed). Otherwise the job is ingested by the next step, as a release
// lost in a crash. One scan of the outcomes for all of them: this only
// happens after a crash.
func (d *driver) settleFinished(again []pendingRelease) {
	if len(again) == 0 {
		return
	}
	want := make(map[string]bool, len(again))
	for _, p := range again {
		want[p.req.ID] = false
	}
	for i := range d.outcomes {
		if _, ok := want[d.outcomes[i].JobID]; ok {
			want[d.outcomes[i].JobID] = true
		}
	}
	if err := d.st.ScanOutcomes(func(o *crawl.Outcome) bool {
		if _, ok := want[o.JobID]; ok {
			want[o.JobID] = true
		}
		return true
	}); err != nil {
		d.log.Warn().Err(err).Msg("cannot read the outcomes; ingesting the jobs found finished")
	}
	for _, p := range again {
		st := d.located[p.req.ID]
		delete(d.located, p.req.ID)
		if !want[p.req.ID] {
			d.finished[p.req.ID] = st
			continue
		}
		d.log.Info().Str("job_id", p.req.ID).Msg("released twice after a crash and ingested already; dropping the second release")
		d.dropRelease(p)
	}
}

// releasedAlready tells whether entry e's job is in flight, or is a
// failed release put back (crawl.Entry.Requeued) whose job was released
// and ingested after all: a submit refused because the job's lock was
// held, then a crash before the domain file recorded the undo, leaves
// both the original entry and its copy in the queue. Releasing the copy
// would find the job (a duplicate ID), take it for one released before a
// crash and ingest it again, counting its page twice.
func (d *driver) releasedAlready(dd *crawl.Domain, e crawl.Entry) bool {
	id := crawl.RetryJobID(d.st.Name, e.URL, dd.Round, e.Try)
	if _, ok := d.inflight[id]; ok {
		return true
	}
	if !e.Requeued {
		return false
	}
	for i := range d.outcomes { // ingested in this step, not yet appended
		if d.outcomes[i].JobID == id {
			return true
		}
	}
	found := false
	if err := d.st.ScanOutcomes(func(o *crawl.Outcome) bool {
		found = o.JobID == id
		return !found
	}); err != nil {
		d.log.Warn().Err(err).Str("job_id", id).Msg("cannot read the outcomes; releasing the URL put back")
		return false
	}
	return found
}

// dropRelease takes back a staged URL release without putting its entry
// back: its job exists and was ingested.
func (d *driver) dropRelease(p pendingRelease) {
	d.takeBack(p)
	d.dirty[p.dm.d.Domain] = true
	d.refreshWork(p.dm)
}

// takeBack removes a staged release's flight and its counts.
func (d *driver) takeBack(p pendingRelease) {
	dd := p.dm.d
	for i := range dd.InFlight {
		if dd.InFlight[i].ID == p.req.ID {
			dd.InFlight = append(dd.InFlight[:i], dd.InFlight[i+1:]...)
			break
		}
	}
	delete(d.inflight, p.req.ID)
	if p.entry == nil {
		dd.RobotsFetches--
	} else if p.entry.Try == 0 { // a retry was not counted (releaseFetch)
		dd.PagesReleased--
		dd.RunReleased--
		d.released--
		d.runReleased--
	}
}

// unrelease takes back a staged release whose submit failed.
func (d *driver) unrelease(p pendingRelease) {
	d.takeBack(p)
	dd := p.dm.d
	if p.entry != nil {
		seg := dd.Segment(p.entry.Depth, p.entry.Priority)
		key := segKey{dd.Domain, seg.File}
		e := *p.entry
		e.Requeued = true // not a discovery (crawl.Entry.Discovery)
		d.appends[key] = append(d.appends[key], e)
	}
	// Try the domain again in a second, not at the next pass: a lock
	// that stays held would otherwise re-append the URL every pass.
	retry := time.Now().Add(time.Second)
	dd.NextReleaseAt = &retry
	d.dirty[dd.Domain] = true
	d.refreshWork(p.dm)
}

func (d *driver) afterRelease(dm *dom, interval time.Duration, now time.Time) {
	dd := dm.d
	if dd.Status == crawl.DomainPending || dd.Status == crawl.DomainExhausted {
		d.transition(dm, crawl.DomainActive, "", "")
	}
	dd.IntervalSeconds = interval.Seconds()
	t := now.Add(interval + d.jitter())
	if dd.NextReleaseAt == nil || dd.NextReleaseAt.Before(t) {
		dd.NextReleaseAt = &t
	}
	d.dirty[dd.Domain] = true
}
