package frontier

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// Refresh rounds (seed 004 phase D; docs/PIPELINE.md). A refresh request
// (requests/, op "refresh", written by farroctl pipeline for a due
// exhausted domain or a changed source) makes an exhausted domain start a
// new round: its round number goes up, it goes back to pending, and every
// URL it knows (each URL of outcomes.jsonl of the domain, at its lowest
// depth) is queued again with the validators and body hash of its last
// response. The round's jobs have their own IDs (crawl.RoundJobID), so the
// spool's duplicate refusal still guards each round; the seen-set is left
// alone, so links found again are not queued twice while new ones are.
//
// Order of writes, as for discoveries: the entries (which carry the new
// round) are appended and fsynced before the domain entity that counts
// them; a frontier that dies in between finds the entries beyond the
// recorded size at load and adopts their round (adoptRound), so the
// request, read again, sees the round started and is not applied twice.

// refreshRequest decides what to do with a refresh request now: the
// domain to refresh, or keep=true to leave the file for a later step
// (the domain is still at work: it is refreshed once exhausted). A
// request for an unknown domain, for one refreshed since, or for one given
// up is dropped (logged).
func (d *driver) refreshRequest(r *crawl.Request, path string, batch []*dom) (*dom, bool) {
	dm := d.get(r.Domain)
	switch {
	case dm == nil:
		d.log.Warn().Str("domain", r.Domain).Msg("refresh of an unknown domain ignored")
		return nil, false
	case r.Before == nil:
		d.log.Warn().Str("file", path).Msg("refresh request without \"before\" ignored")
		return nil, false
	case !roundStart(dm.d).Before(*r.Before):
		return nil, false // refreshed since it was asked
	}
	for _, b := range batch {
		if b == dm {
			return nil, false
		}
	}
	dd := dm.d
	if dd.Held() { // registry.go: another crawl exhausted it
		d.log.Warn().Str("domain", dd.Domain).Msg("refresh of a domain held for the registry dropped (farroctl domain reset first)")
		return nil, false
	}
	if !gaveUp(dd) && d.rereadSitemaps(dm, *r.Before, time.Now().UTC()) { // sitemap.go
		return nil, true // not kept: the crawl is not done before the round starts
	}
	switch {
	case gaveUp(dd):
		d.log.Warn().Str("domain", dd.Domain).Str("status", string(dd.Status)).Msg("refresh of a domain given up dropped (farroctl domain reset first)")
		return nil, false
	case dd.Status == crawl.DomainExhausted && dd.Pending() == 0 && len(dd.InFlight) == 0:
		return dm, false
	case dd.Pending() > 0 || len(dd.InFlight) > 0:
		d.kept[path] = true
		return nil, true
	case dd.Status == crawl.DomainPending || dd.Status == crawl.DomainActive:
		// No work left but not settled yet: settle it, then refresh.
		d.dirty[dd.Domain] = true
		d.kept[path] = true
		return nil, true
	}
	d.log.Warn().Str("domain", dd.Domain).Str("status", string(dd.Status)).Msg("refresh of a resting domain dropped")
	return nil, false
}

// roundStart is when the domain's current round started (its first
// sighting for round 0).
func roundStart(dd *crawl.Domain) time.Time {
	if dd.RoundStartedAt != nil {
		return *dd.RoundStartedAt
	}
	return dd.FirstSeenAt
}

// known is a URL a refresh queues again.
type known struct {
	url          string
	depth        int
	etag, lm     string
	sha          string
	order        int
	haveResponse bool
	fetchedAt    time.Time          // of the last response
	req          crawl.RequisiteRef // a page requisite (images.go)
}

// startRefresh starts a new round of every domain of doms: one pass over
// outcomes.jsonl collects their known URLs (memory: one entry per known
// URL of the domains refreshed in this step).
func (d *driver) startRefresh(doms []*dom, now time.Time) {
	if len(doms) == 0 {
		return
	}
	urls := map[string]map[string]*known{}
	for _, dm := range doms {
		urls[dm.d.Domain] = map[string]*known{}
	}
	n := 0
	err := d.st.ScanOutcomes(func(o *crawl.Outcome) bool {
		m := urls[o.Domain]
		if m == nil || o.URL == "" {
			return true
		}
		k := m[o.URL]
		if k == nil {
			k = &known{url: o.URL, depth: o.Depth, order: n, req: o.RequisiteRef}
			n++
			m[o.URL] = k
		}
		k.depth = min(k.depth, o.Depth)
		if o.Outcome == crawl.OutcomeFetched && o.HTTPStatus != 0 {
			k.etag, k.lm, k.sha, k.haveResponse = o.ETag, o.LastModified, o.SHA256, true
			if o.FetchedAt != nil && o.FetchedAt.After(k.fetchedAt) {
				k.fetchedAt = *o.FetchedAt
			}
		}
		return true
	})
	if err != nil {
		// Nothing changed yet: the requests stay and are applied again.
		// (A reset read in this step is applied again too: harmless.)
		d.log.Error().Err(err).Msg("refresh: cannot read outcomes.jsonl; retrying")
		d.requests = d.requests[:0]
		return
	}
	changed := d.sitemapChanged(urls) // sitemap.go: released first
	for _, dm := range doms {
		dd := dm.d
		list := make([]*known, 0, len(urls[dd.Domain]))
		for _, k := range urls[dd.Domain] {
			list = append(list, k)
		}
		sort.Slice(list, func(i, j int) bool {
			if list[i].depth != list[j].depth {
				return list[i].depth < list[j].depth
			}
			return list[i].order < list[j].order
		})
		dd.Round++
		t := now
		dd.RoundStartedAt = &t
		for _, k := range list {
			prio := 0
			if changed[k.url] {
				prio = 1
			}
			seg := dd.Segment(k.depth, prio)
			key := segKey{dd.Domain, seg.File}
			e := crawl.Entry{URL: k.url, Depth: k.depth, Priority: prio, At: now, Round: dd.Round, RequisiteRef: k.req}
			if k.haveResponse {
				e.ETag, e.LastModified, e.PrevSHA256, e.Known = k.etag, k.lm, k.sha, true
			}
			d.appends[key] = append(d.appends[key], e)
		}
		d.transition(dm, crawl.DomainPending, crawl.ReasonRefresh, fmt.Sprintf("round %d: %d known URLs revisited", dd.Round, len(list)))
		d.dirty[dd.Domain] = true
		d.log.Info().Str("domain", dd.Domain).Int("round", dd.Round).Int("urls", len(list)).Msg("domain refresh started")
	}
}

// adoptRound takes over a round whose entries were appended by a refresh
// that died before writing the domain.
func (d *driver) adoptRound(dm *dom, round int, at time.Time) {
	dd := dm.d
	dd.Round = round
	t := at
	dd.RoundStartedAt = &t
	if dd.Status == crawl.DomainExhausted {
		d.transition(dm, crawl.DomainPending, crawl.ReasonRefresh, fmt.Sprintf("round %d (recovered)", round))
	}
	d.dirty[dd.Domain] = true
}

// setDone moves the running crawl to done, unless a request arrived that
// this driver has not read yet (a refresh written just before farroctl
// found the crawl running: it must not be stranded in a done crawl). The
// check is made under crawl.lock, which farroctl holds when it resumes a
// done crawl after writing its requests.
func (d *driver) setDone(reason string) bool {
	ok := d.updateCrawl(func(c *crawl.Crawl) error {
		if c.State != crawl.Running {
			return errChanged
		}
		names, err := readDirNames(d.st.Path(crawl.RequestsDir))
		if err != nil {
			return err
		}
		for _, n := range names {
			if p := filepath.Join(d.st.Path(crawl.RequestsDir), n); !d.kept[p] {
				return errChanged
			}
		}
		c.State, c.StateReason = crawl.Done, reason
		t := time.Now().UTC()
		c.FinishedAt = &t
		return nil
	})
	if ok {
		d.log.Info().Str("from", string(crawl.Running)).Str("to", string(crawl.Done)).Str("reason", reason).Msg("crawl state changed")
	}
	return ok
}
