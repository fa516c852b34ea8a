package frontier

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/robots"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// maxRetryAfter caps how far a Retry-After pushes a domain back.
const maxRetryAfter = time.Hour

func jsonLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// noteFinished records that job id reached terminal state st (a watch
// event); it is ingested by the next step if it is one of ours in flight.
func (d *driver) noteFinished(id string, st job.State) {
	if _, ok := d.inflight[id]; ok {
		d.finished[id] = st
	}
}

// rescanInFlight looks every job in flight up in the job store (stateOf):
// a wake-up may have been lost, or the job finished while no frontier
// ran.
func (d *driver) rescanInFlight() {
	d.lastScan = time.Now()
	for id := range d.inflight {
		if _, ok := d.finished[id]; ok {
			continue
		}
		st, err := d.stateOf(id)
		switch {
		case errors.Is(err, job.ErrNotFound):
			d.finished[id] = ""
		case err == nil && st.Terminal():
			d.finished[id] = st
		}
	}
}

// stateOf returns where job id is in the job store (job.ErrNotFound: it
// is nowhere): the place GetDir found it in, not its job.json's status. A
// spool commits a transition by the rename of the job's directory, and
// its job.json names the new state just before (a commit under way), so
// a job is finished only once it is in succeeded/ or killed/, its
// result beside it. A job whose job.json cannot be read is in the state
// of the place it is in.
func (d *driver) stateOf(id string) (job.State, error) {
	_, loc, err := d.f.dirs.GetDir(d.f.ctx, id, "")
	if loc.State != "" {
		return loc.State, nil
	}
	return "", err
}

// finishedJob reads finished job id from the job store, looking first in
// st, the terminal state a wake-up or a rescan saw it reach: its
// lifecycle (nil if unreadable) and where its artifact is (store.Dirs;
// "" when it is no longer in a terminal state). A job that moved on since
// (retention) is found again wherever it is.
func (d *driver) finishedJob(id string, st job.State) (job.State, string, *job.Job) {
	j, loc, err := d.f.dirs.GetDir(d.f.ctx, id, st)
	if loc.State == "" || !loc.State.Terminal() {
		return st, "", nil
	}
	if err != nil {
		j = nil
	}
	return loc.State, loc.Dir, j
}

// ingestFinished ingests every finished job noted: its outcome updates its
// domain and its links are discovered.
func (d *driver) ingestFinished(now time.Time) {
	for id, st := range d.finished {
		delete(d.finished, id)
		name, ok := d.inflight[id]
		if !ok {
			continue
		}
		dm := d.get(name)
		var fl *crawl.Flight
		if dm != nil {
			for i := range dm.d.InFlight {
				if dm.d.InFlight[i].ID == id {
					f := dm.d.InFlight[i]
					fl = &f
					dm.d.InFlight = append(dm.d.InFlight[:i], dm.d.InFlight[i+1:]...)
					break
				}
			}
		}
		delete(d.inflight, id)
		delete(d.asked, id)
		if dm == nil || fl == nil {
			continue
		}
		d.dirty[name] = true
		dir := ""
		var j *job.Job
		if st != "" {
			st, dir, j = d.finishedJob(id, st)
		}
		if fl.Kind == crawl.KindRobots {
			d.ingestRobots(dm, fl, st, dir, j, now)
		} else {
			d.ingestFetch(dm, fl, st, dir, j, now)
		}
		d.refreshWork(dm)
	}
}

// ingestFetch ingests a finished crawl.fetch job.
func (d *driver) ingestFetch(dm *dom, fl *crawl.Flight, st job.State, dir string, j *job.Job, now time.Time) {
	dd := dm.d
	var art crawl.Artifact
	haveArt := false
	if dir != "" {
		if err := crawl.ReadResult(dir, &art); err == nil {
			haveArt = true
		} else if !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn().Err(err).Str("job_id", fl.ID).Msg("unreadable artifact")
		}
	}
	out := crawl.Outcome{Time: now, URL: fl.URL, Domain: dd.Domain, JobID: fl.ID, Referrer: fl.From, Depth: fl.Depth, RequisiteRef: fl.RequisiteRef}
	if haveArt {
		out.Depth, out.HTTPStatus, out.SHA256, out.Links = art.Depth, art.HTTPStatus, art.SHA256, len(art.Links)
		out.ETag, out.LastModified, out.Unchanged, out.Round = art.Headers["ETag"], art.Headers["Last-Modified"], art.Unchanged, art.Round
		if !art.FetchedAt.IsZero() {
			t := art.FetchedAt
			out.FetchedAt = &t
		}
	}
	switch {
	case st == job.Succeeded && haveArt && art.Outcome == crawl.OutcomeFetched:
		out.Outcome, out.PageDirectives = crawl.OutcomeFetched, art.PageDirectives
		d.responseHealth(dm, &art, now)
		if d.retryServerError(dm, fl, &art, now) {
			return // queued again (retry.go): no outcome yet
		}
		if art.ErrorCode == crawl.ErrCodeContentType {
			out.Detail = art.Error
		} else if art.LoginWall != "" {
			out.Detail = "login wall (" + art.LoginWall + ")"
		}
		d.loginWall(dm, &art, now) // loginwall.go, before fetched counts the page
		d.fetched(dm, fl, &art, &out, now)
		if fl.Known {
			dd.PagesRecrawled++
			out.Recrawl = true
		}
	case st == job.Succeeded && haveArt && art.Outcome == crawl.OutcomeRefused:
		out.Outcome, out.Detail, out.ErrorCode = crawl.OutcomeRefused, art.Error, art.ErrorCode
		if art.ErrorCode == crawl.ErrCodePrivate {
			out.Outcome = crawl.OutcomePrivateAddress
		}
		d.refused(dm, &art, now)
	case haveArt && art.Outcome == crawl.OutcomeNetworkError && !d.stopped(j):
		attempts := 1
		if j != nil && j.Attempts > 0 {
			attempts = j.Attempts
		}
		d.networkFailure(dm, art.ErrorCode, art.Error, attempts, now)
		d.spaceAfter(dm, art.FetchedAt, now)
		if d.retryFailure(dm, fl, art.ErrorCode, true, 0, now) {
			return
		}
		// Out of attempts while its domain answers others.
		out.Outcome, out.Detail = crawl.OutcomeFailed, art.ErrorCode+": "+art.Error
		dd.PagesFailed++
	default:
		if st == job.Killed && !d.stopped(j) && d.retryFailure(dm, fl, "lost", false, 0, now) {
			// Killed by managerd after its agent died: tried again, also
			// when the agent had staged its artifact before it died (the
			// page was fetched; its job was never committed).
			return
		}
		out.Outcome = crawl.OutcomeKilled
		dd.PagesFailed++
		switch {
		case j != nil:
			out.Detail = j.Reason
		case st == "":
			out.Detail = "job not found in the spool (removed by retention?)"
		default:
			out.Detail = "no artifact"
		}
	}
	d.outcomes = append(d.outcomes, out)
}

// fetched ingests an HTTP response (responseHealth has counted it
// toward its domain's health).
func (d *driver) fetched(dm *dom, fl *crawl.Flight, art *crawl.Artifact, out *crawl.Outcome, now time.Time) {
	dd := dm.d
	dd.PagesCrawled++
	// Counted here, with the page's outcome, not in responseHealth: a
	// response retried (5xx) finishes no page and has no outcome line,
	// and the counters are those of the outcome lines (crawl.Recount).
	dd.StatusCounts[statusKey(art.HTTPStatus)]++
	fa := art.FetchedAt
	dd.LastCrawledAt = &fa
	switch {
	case art.Unchanged:
		dd.PagesUnchanged++
	case art.HTTPStatus >= 200 && art.HTTPStatus < 300:
		dd.PagesNew++
	}
	d.beginTally(fl.ID)
	for _, l := range art.Links {
		d.discover(l, art.Depth+1, 0, 0, art.NormalizedURL, now)
	}
	d.pageRequisites(dm, fl, art, out, now) // images.go
	if art.RedirectTo != "" {
		// A requisite redirected stays a requisite of its page.
		d.discoverAs(art.RedirectTo, art.Depth, art.Hops+1, 0, art.NormalizedURL, fl.RequisiteRef, now)
	}
	d.endTally()
}

// responseHealth counts an HTTP response toward its domain's health:
// status counts, error streaks, blocks, Retry-After, spacing.
func (d *driver) responseHealth(dm *dom, art *crawl.Artifact, now time.Time) {
	dd := dm.d
	d.spaceAfter(dm, art.FetchedAt, now)
	s := art.HTTPStatus
	switch {
	case s == 403 || s == 429 || s >= 500:
		dd.TotalErrorCount++
		dd.ConsecutiveErrorCount++
		dd.ConsecutiveNetErrorCount, dd.NetErrorsSince = 0, nil
		reason := crawl.ReasonServerErrors
		switch s {
		case 403:
			reason = crawl.ReasonForbidden
		case 429:
			reason = crawl.ReasonRateLimited
		}
		if art.RetryAfter > 0 && (s == 429 || s == 503) {
			ra := min(time.Duration(art.RetryAfter*float64(time.Second)), maxRetryAfter)
			t := now.Add(ra)
			if dd.NextCrawlAfter == nil || dd.NextCrawlAfter.Before(t) {
				dd.NextCrawlAfter = &t
			}
			d.log.Info().Str("domain", dd.Domain).Int("http_status", s).Dur("retry_after_ms", ra).Msg("domain pushed back by Retry-After")
		}
		if dd.ConsecutiveErrorCount >= d.cfg.BlockThreshold {
			d.block(dm, crawl.DomainBlocked, reason, fmt.Sprintf("%d consecutive 403/429/5xx responses (last %d)", dd.ConsecutiveErrorCount, s), d.cfg.CooldownFor(crawl.DomainBlocked, reason), now)
		}
	default:
		dd.ConsecutiveErrorCount, dd.ConsecutiveNetErrorCount, dd.NetErrorsSince = 0, 0, nil
		if dd.Status == crawl.DomainPending {
			d.transition(dm, crawl.DomainActive, "", "")
		}
	}
}

// refused ingests a fetch the fetcher refused to make.
func (d *driver) refused(dm *dom, art *crawl.Artifact, now time.Time) {
	dd := dm.d
	switch art.ErrorCode {
	case crawl.ErrCodePrivate:
		dd.Refused++
		d.refusedPrivate(dm, art.Error, now)
	case crawl.ErrCodeRobots:
		dd.RobotsDenied++
		// The fetcher disagreed with the frontier's robots.txt (or could
		// not read it): fetch robots.txt again before the next release.
		if o, err := crawl.Origin(art.NormalizedURL); err == nil {
			delete(dd.Robots, o)
			delete(dm.parsed, o)
		}
	default:
		dd.Refused++
	}
}

// networkFailure counts failed attempts toward unreachable.
func (d *driver) networkFailure(dm *dom, code, msg string, attempts int, now time.Time) {
	dd := dm.d
	dd.TotalErrorCount += attempts
	if dd.ConsecutiveNetErrorCount == 0 || dd.NetErrorsSince == nil {
		t := now
		dd.NetErrorsSince = &t
	}
	dd.ConsecutiveNetErrorCount += attempts
	if d.cfg.OutageJudged(dd.ConsecutiveNetErrorCount, *dd.NetErrorsSince, now) {
		reason := code
		switch code {
		case crawl.ReasonDNSFailure, crawl.ReasonConnectFailure, crawl.ReasonTimeout:
		default:
			reason = crawl.ReasonNetworkFailure
		}
		d.block(dm, crawl.DomainUnreachable, reason, fmt.Sprintf("%d consecutive network failures (last: %s)", dd.ConsecutiveNetErrorCount, firstLine(msg, 200)), d.cfg.UnreachableCooldown.D(), now)
	}
}

// block moves a domain to blocked or unreachable with a cooldown; after
// MaxDomainRetries cooldowns it stays there for this crawl (gave up).
func (d *driver) block(dm *dom, to crawl.DomainStatus, reason, detail string, cooldown time.Duration, now time.Time) {
	dd := dm.d
	if dd.Status == to {
		return
	}
	if dd.Status == crawl.DomainExhausted {
		// exhausted -> blocked is not a legal transition: go through
		// active (new work arrived meanwhile).
		d.transition(dm, crawl.DomainActive, "", "")
	}
	dd.Cooldowns++
	if dd.FirstBlockedAt == nil {
		t := now
		dd.FirstBlockedAt = &t
	}
	if dd.Cooldowns > d.cfg.MaxDomainRetries || cooldown <= 0 {
		dd.NextCrawlAfter = nil
		detail += fmt.Sprintf("; %s: no more retries in this crawl (domain reset to retry)", crawl.ReasonGaveUp)
	} else {
		t := now.Add(cooldown)
		if dd.NextCrawlAfter == nil || dd.NextCrawlAfter.Before(t) {
			dd.NextCrawlAfter = &t
		}
		detail += fmt.Sprintf("; retry %d/%d after %s", dd.Cooldowns, d.cfg.MaxDomainRetries, dd.NextCrawlAfter.Format(time.RFC3339))
	}
	d.transition(dm, to, reason, detail)
}

// spaceAfter schedules the domain's next release one interval (plus
// jitter) after a request that started at start.
func (d *driver) spaceAfter(dm *dom, start, now time.Time) {
	if start.IsZero() {
		start = now
	}
	dd := dm.d
	if dd.LastRequestAt == nil || dd.LastRequestAt.Before(start) {
		s := start
		dd.LastRequestAt = &s
	}
	t := start.Add(d.interval(dd) + d.jitter())
	if dd.NextReleaseAt == nil || dd.NextReleaseAt.Before(t) {
		dd.NextReleaseAt = &t
	}
}

func (d *driver) interval(dd *crawl.Domain) time.Duration {
	return d.cfg.Interval(time.Duration(dd.CrawlDelay * float64(time.Second)))
}

func (d *driver) jitter() time.Duration {
	if d.cfg.Jitter <= 0 {
		return 0
	}
	return time.Duration(d.f.cfg.Rand(int64(d.cfg.Jitter)))
}

// ingestRobots records a finished crawl.robots job in the domain's robots
// cache.
func (d *driver) ingestRobots(dm *dom, fl *crawl.Flight, st job.State, dir string, j *job.Job, now time.Time) {
	dd := dm.d
	var art crawl.RobotsArtifact
	haveArt := false
	if dir != "" && st == job.Succeeded {
		haveArt = crawl.ReadResult(dir, &art) == nil
	}
	prev := dd.Robots[fl.Origin]
	rc := &crawl.RobotsCache{Origin: fl.Origin, JobID: fl.ID, FetchedAt: now}
	if haveArt {
		rc.FetchedAt, rc.HTTPStatus, rc.FinalURL = art.FetchedAt, art.HTTPStatus, art.FinalURL
		rc.BodySHA256, rc.BodyBytes, rc.Error, rc.Verdict = art.BodySHA256, art.BodyBytes, art.Error, art.Verdict
		if rc.FetchedAt.IsZero() {
			rc.FetchedAt = now
		}
	} else {
		rc.Verdict = crawl.RobotsDisallowAll
		rc.Error = "robots.txt job did not finish"
		if j != nil {
			rc.Error += ": " + j.Reason
		}
	}
	r, err := d.st.LoadRobots(rc.Verdict, rc.BodySHA256)
	if err != nil {
		// The stored copy is missing: as if robots.txt were unreachable
		// (the domain rests, then robots.txt is fetched again).
		rc.Verdict, rc.HTTPStatus, rc.Error = crawl.RobotsDisallowAll, 0, err.Error()
		r = robots.DisallowAll()
	}
	dm.parsed[fl.Origin] = r
	if cd, ok := r.CrawlDelay(d.cfg.UserAgent); ok {
		capped := min(cd, d.cfg.MaxCrawlDelay.D())
		rc.CrawlDelay = capped.Seconds()
		if capped.Seconds() > dd.CrawlDelay {
			dd.CrawlDelay = capped.Seconds()
		}
	}
	dd.IntervalSeconds = d.interval(dd).Seconds()
	unreachable := rc.Verdict == crawl.RobotsDisallowAll && (rc.HTTPStatus == 0 || rc.HTTPStatus == 429 || rc.HTTPStatus >= 500)
	if unreachable {
		rc.Failures = 1
		if prev != nil {
			rc.Failures = prev.Failures + 1
		}
	}
	dd.Robots[fl.Origin] = rc
	d.spaceAfter(dm, rc.FetchedAt, now)
	delete(d.rereading, fl.ID)
	if haveArt {
		d.beginTally(fl.ID)
		d.ingestSitemaps(dm, &art, now) // sitemap.go
		d.endTally()
	}
	d.log.Info().Str("domain", dd.Domain).Str("origin", fl.Origin).Int("http_status", rc.HTTPStatus).
		Str("verdict", rc.Verdict).Float64("crawl_delay_s", rc.CrawlDelay).Msg("robots.txt")
	if haveArt && art.ErrorCode == crawl.ErrCodePrivate && !d.cfg.AllowPrivate {
		// The SSRF guard refused the domain's address: every request to
		// it would be refused the same way, so no cooldown (private.go).
		d.refusedPrivate(dm, art.Error, now)
		return
	}
	if unreachable && d.cfg.ObeyRobots {
		detail := fmt.Sprintf("robots.txt of %s answered %d: disallow all", fl.Origin, rc.HTTPStatus)
		if rc.HTTPStatus == 0 {
			detail = fmt.Sprintf("robots.txt of %s unreachable (%s): disallow all", fl.Origin, firstLine(rc.Error, 160))
		}
		d.block(dm, crawl.DomainBlocked, crawl.ReasonRobotsUnavailable, detail, d.cfg.BlockCooldown.D(), now)
	}
}

// discover takes one link (or seed, or redirect target) through
// normalization, scope, depth and dedup, and queues it for its domain.
func (d *driver) discover(raw string, depth, hops, prio int, from string, now time.Time) {
	d.discoverAs(raw, depth, hops, prio, from, crawl.RequisiteRef{}, now)
}

// discoverAs is discover for a URL that is a page requisite when req is
// set (images.go).
func (d *driver) discoverAs(raw string, depth, hops, prio int, from string, req crawl.RequisiteRef, now time.Time) {
	t := &d.tally // counts.go: this job's line of links.jsonl
	u, err := d.cfg.NormalizeURL(raw)
	if err != nil {
		t.Invalid++
		return
	}
	if ok, _ := d.scoper.InScope(u); !ok {
		t.OutOfScope++
		return
	}
	if from != "" { // seeds are exempt from the URL filters
		if ok, _ := d.filter.Allowed(u); !ok {
			t.Filtered++
			return
		}
	}
	k := crawl.URLKey(u)
	if depth > d.cfg.MaxDepth {
		if has, _ := d.deep.Has(k); !has {
			d.deep.Add(k)
			d.tooDeep(u, k) // depth.go
		}
		t.TooDeep++
		return
	}
	if hops > d.cfg.MaxRedirects {
		t.TooManyHop++
		return
	}
	name, parent, err := crawl.DomainOf(u)
	if err != nil {
		t.Invalid++
		return
	}
	// Accepted: queued below unless seen, in which case a duplicate
	// (duplicates are accepted links minus URLs queued, counts.go).
	t.Accepted++
	has, err := d.seen.Has(k)
	if err != nil {
		// Queue it: a duplicate is refused at release anyway.
		d.log.Warn().Err(err).Msg("seen-set lookup failed")
	}
	if has {
		return
	}
	d.seen.Add(k)
	dm := d.domain(name, parent, now)
	if dm == nil {
		return // its file is unreadable (logged)
	}
	d.shallower(dm, k) // depth.go
	seg := dm.d.Segment(depth, prio)
	key := segKey{name, seg.File}
	d.appends[key] = append(d.appends[key], crawl.Entry{URL: u, Depth: depth, Priority: prio, Hops: hops, From: crawl.BoundReferrer(from), At: now, RequisiteRef: req})
	dm.d.PagesDiscovered++
	d.discovered++
	if dm.d.Status == crawl.DomainExhausted && !dm.d.Held() { // held for the registry: stays exhausted (registry.go)
		d.transition(dm, crawl.DomainActive, "", "")
	}
	d.dirty[name] = true
}

// flushAppends appends the buffered discoveries to their segments and
// fsyncs them, before anything that counts them is written.
func (d *driver) flushAppends() error {
	for key, entries := range d.appends {
		dm := d.get(key.domain)
		if dm == nil {
			delete(d.appends, key)
			continue
		}
		var seg *crawl.Segment
		for _, s := range dm.d.Queue {
			if s.File == key.file {
				seg = s
			}
		}
		if seg == nil {
			delete(d.appends, key)
			continue
		}
		dir := d.st.QueueDir(key.domain)
		if !dm.mkdirDone {
			if err := fsq.MkdirDurable(dir); err != nil {
				return err
			}
			dm.mkdirDone = true
		}
		size, err := crawl.AppendEntries(filepath.Join(dir, key.file), entries)
		if err != nil {
			return err
		}
		seg.Size, seg.Count = size, seg.Count+int64(len(entries))
		delete(d.appends, key)
		d.refreshWork(dm)
	}
	return nil
}

func statusKey(s int) string {
	return fmt.Sprintf("%d", s)
}

func firstLine(s string, n int) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			s = s[:i]
			break
		}
	}
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
