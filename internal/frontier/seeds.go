package frontier

import (
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// seedsWait is how long a request waits for its seeds to appear in
// crawl.json.
const seedsWait = time.Minute

// addSeedsRequest queues the seeds an operator added to a crawl
// (farroctl crawl add-seeds): depth 0, their priority, through the same
// door as the crawl's first seeds (discover: normalized, scoped, and
// deduplicated by the seen-set, so a seed already queued or fetched is
// counted a duplicate and a request applied twice queues nothing twice).
// A seed's domain is created pending, or keeps its state: a blocked one
// is not released before its cooldown ends.
//
// farroctl adds the seeds to crawl.json (they define the scope) and
// writes the request under crawl.lock; the frontier may read the request
// before the new crawl.json, so it reads crawl.json again and, if the
// seeds are still not there, leaves the request for a later step (keep;
// not marked kept, so the crawl is not declared done meanwhile).
func (d *driver) addSeedsRequest(r *crawl.Request, now time.Time) (keep bool) {
	if !d.hasSeeds(r.Seeds) {
		if cfg, stamp, err := d.loadConfig(); err == nil {
			if err := d.setConfig(cfg, stamp); err != nil {
				d.log.Error().Err(err).Msg("invalid crawl.json; keeping the previous one")
			}
		}
		if !d.hasSeeds(r.Seeds) {
			if now.Sub(r.RequestedAt) > seedsWait {
				// farroctl died between the request and crawl.json,
				// or its write failed: it reported the error.
				d.log.Error().Int("seeds", len(r.Seeds)).Str("requested_by", r.Actor).Msg("added seeds never reached crawl.json; request dropped")
				return false
			}
			return true
		}
	}
	before := d.fr.Duplicates
	for _, s := range r.Seeds {
		d.discoverSeed(s, now)
	}
	d.log.Info().Int("seeds", len(r.Seeds)).Int64("duplicates", d.fr.Duplicates-before).Str("requested_by", r.Actor).Msg("seeds added")
	return false
}

// hasSeeds tells whether every seed of seeds is one of the crawl's.
func (d *driver) hasSeeds(seeds []crawl.Seed) bool {
	have := make(map[string]bool, len(d.cfg.Seeds))
	for _, s := range d.cfg.Seeds {
		have[s.URL] = true
	}
	for _, s := range seeds {
		if !have[s.URL] {
			return false
		}
	}
	return true
}

// discoverSeed queues seed s (discover) and gives its domain the seed's
// rank and source (crawl.Domain.AdoptSeed), also when the URL was queued
// before: a seed added again with a better rank raises its domain. A
// crash before the domain is written loses nothing: the seeds are
// discovered again (frontier.json's seeded flag, the request file).
func (d *driver) discoverSeed(s crawl.Seed, now time.Time) {
	d.discover(s.URL, 0, 0, s.Priority, "", now)
	if s.Rank == 0 && s.Source == "" {
		return
	}
	u, err := d.cfg.NormalizeURL(s.URL)
	if err != nil {
		return
	}
	name, _, err := crawl.DomainOf(u)
	if err != nil {
		return
	}
	if dm := d.get(name); dm != nil && dm.d.AdoptSeed(s) {
		d.dirty[name] = true
	}
}
