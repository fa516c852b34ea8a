package frontier

import (
	"sort"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// Sitemaps (docs/CRAWL.md "Sitemaps"): a crawl.robots job of a crawl with
// sitemaps on also reads the origin's sitemaps and hands their URLs back
// in its artifact. The frontier takes them like links of the site's root
// (depth crawl.SitemapDepth: normalized, scoped, deduplicated against the
// seen-set) and records the lastmod of every in-scope one in
// sitemaps.jsonl, whether it was new or not, so that a refresh round can
// tell the pages that changed since their last fetch (sitemapChanged).

// ingestSitemaps discovers the URLs of a robots job's sitemaps.
func (d *driver) ingestSitemaps(dm *dom, art *crawl.RobotsArtifact, now time.Time) {
	for i := range art.Sitemaps {
		sf := &art.Sitemaps[i]
		ev := d.log.Info()
		if sf.Error != "" {
			ev = d.log.Warn().Str("error_code", sf.ErrorCode).Str("error", firstLine(sf.Error, 200))
		}
		ev.Str("domain", dm.d.Domain).Str("sitemap", sf.URL).Int("http_status", sf.HTTPStatus).Str("kind", sf.Kind).
			Int("urls", sf.URLs).Int("dropped", sf.Dropped).Int64("duration_ms", sf.DurationMS).Msg("sitemap")
	}
	for _, su := range art.SitemapURLs {
		d.discover(su.URL, crawl.SitemapDepth, 0, 0, su.From, now)
		if su.LastMod == nil {
			continue
		}
		u, err := d.cfg.NormalizeURL(su.URL)
		if err != nil {
			continue
		}
		if ok, _ := d.scoper.InScope(u); !ok {
			continue
		}
		name, _, err := crawl.DomainOf(u)
		if err != nil {
			continue
		}
		d.sitemapLines = append(d.sitemapLines, crawl.SitemapLine{Time: now, URL: u, Domain: name, LastMod: *su.LastMod})
	}
}

// flushSitemapLines appends the lastmods read to sitemaps.jsonl (fsync).
// Ingestion is at-least-once, so a line can repeat: readers keep the
// latest lastmod of a URL.
func (d *driver) flushSitemapLines() error {
	if len(d.sitemapLines) == 0 {
		return nil
	}
	if err := appendJSONLines(d.st.Path(crawl.SitemapsFile), d.sitemapLines); err != nil {
		return err
	}
	d.sitemapLines = d.sitemapLines[:0]
	return nil
}

// sitemapChanged returns the known URLs of a refresh whose latest
// sitemap lastmod is after their last fetch (or that were never
// fetched): the round releases them first. A URL without a lastmod is
// not in the set. An unreadable sitemaps.jsonl only costs the preference.
func (d *driver) sitemapChanged(urls map[string]map[string]*known) map[string]bool {
	latest := map[string]time.Time{}
	err := d.st.ScanSitemapLines(func(l *crawl.SitemapLine) {
		if m := urls[l.Domain]; m != nil && m[l.URL] != nil && l.LastMod.After(latest[l.URL]) {
			latest[l.URL] = l.LastMod
		}
	})
	if err != nil {
		d.log.Warn().Err(err).Msg("refresh: cannot read sitemaps.jsonl; no page preferred by lastmod")
		return nil
	}
	out := map[string]bool{}
	for _, m := range urls {
		for u, k := range m {
			if lm, ok := latest[u]; ok && (!k.haveResponse || lm.After(k.fetchedAt)) {
				out[u] = true
			}
		}
	}
	return out
}

// rereadSitemaps makes a refresh of a domain read its sitemaps again
// before the round starts, so that the round's order (sitemapChanged)
// uses the lastmods of now rather than those read when the domain was
// last crawled. It returns true while the round must wait: a robots.txt
// job (which reads the sitemaps) of an origin of the domain whose copy is
// older than the request is in flight, or was released now. A domain with
// other work in flight or queued waits as any refresh does (refresh.go).
func (d *driver) rereadSitemaps(dm *dom, before, now time.Time) bool {
	dd := dm.d
	if !d.cfg.Sitemaps || !d.cfg.ObeyRobots {
		return false
	}
	for _, fl := range dd.InFlight {
		if fl.Kind == crawl.KindRobots && d.rereading[fl.ID] {
			return true
		}
	}
	if dd.Status != crawl.DomainExhausted || dd.Pending() > 0 || len(dd.InFlight) > 0 {
		return false
	}
	var stale []string
	for o, rc := range dd.Robots {
		if rc.FetchedAt.Before(before) {
			stale = append(stale, o)
		}
	}
	if len(stale) == 0 {
		return false
	}
	sort.Strings(stale)
	// A release, like any: under crawl.lock shared, only while running.
	l, err := d.st.LockConfig(true)
	if err != nil {
		return true
	}
	defer l.Unlock()
	defer d.flushReleases()
	cfg, stamp, err := d.loadConfig()
	if err != nil || cfg.State != crawl.Running {
		if err == nil {
			_ = d.setConfig(cfg, stamp)
		}
		return true
	}
	for _, o := range stale {
		if len(dd.InFlight) >= d.cfg.MaxInFlightPerDomain {
			break
		}
		d.releaseRobots(dm, o, now)
		d.rereading[dd.InFlight[len(dd.InFlight)-1].ID] = true
	}
	d.dirty[dd.Domain] = true
	d.log.Info().Str("domain", dd.Domain).Int("origins", len(stale)).Msg("refresh waits for the sitemaps to be read again")
	return true
}
