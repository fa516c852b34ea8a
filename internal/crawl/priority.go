package crawl

import (
	"math"
	"sort"
	"time"
)

// Priority is a domain's scheduling score, seed 004 section 6.2, computed
// when it is asked for (never stored, so it is never stale; computing it
// is a few float operations on fields the domain holds):
//
//	score = rank_term + yield_rate*1000 + min(remaining, 500)*2 - error_rate*500 + staleness_days*5
//
// rank_term rewards a good seed rank: 1000/seed_rank (1000 for the first
// domain of a ranked list, 100 for the tenth, 1 for the thousandth, 0
// beyond and for a domain with no rank). The design adds the rank itself,
// which would put the thousandth domain of a list before the first; the
// term keeps the intent (a list's ranks give the initial order) on the
// scale of the other terms. yield_rate is PagesNew / PagesCrawled (the
// share of responses that brought content not seen before) or, for a
// crawl that fetches its pages' images (PriorityFor with images), the
// image yield rate: images_stored / pages crawled (images.go); error_rate
// TotalErrorCount / PagesCrawled (both 0 before the first response),
// remaining the URLs queued and not released, staleness the days since the
// last response (since 2000-01-01 for a domain never crawled, as the
// seed's COALESCE). Blocked and unreachable domains get no score (Scored
// false): the seed leaves them out of the computation.
type Priority struct {
	Score     int     `json:"score"`
	Scored    bool    `json:"scored"`
	SeedRank  int     `json:"seed_rank,omitempty"`
	RankTerm  int     `json:"rank_term,omitempty"`
	YieldRate float64 `json:"yield_rate"`
	// ImageYield: YieldRate is the image yield rate.
	ImageYield    bool    `json:"image_yield,omitempty"`
	ErrorRate     float64 `json:"error_rate"`
	Remaining     int64   `json:"remaining"`
	StalenessDays float64 `json:"staleness_days"`
}

// neverCrawled is the seed's COALESCE(last_crawled_at, '2000-01-01').
var neverCrawled = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// PriorityOf computes d's priority at now, with the page yield rate.
func PriorityOf(d *Domain, now time.Time) Priority { return PriorityFor(d, now, false) }

// PriorityFor computes d's priority at now; with images, its yield term
// is the image yield rate (the crawl fetches its pages' images).
func PriorityFor(d *Domain, now time.Time, images bool) Priority {
	return d.Inputs().PriorityFor(now, images)
}

// PriorityInputs is what a domain's priority and its place in the
// candidate order are computed from: a compact copy the frontier keeps in
// memory for every domain while the entity itself stays on disk.
type PriorityInputs struct {
	Status          DomainStatus
	SeedRank        int
	Pending         int64
	PagesCrawled    int64
	PagesNew        int64
	TotalErrorCount int
	LastCrawledAt   *time.Time
	// ImagesStored and PagesOnly (pages crawled, requisites left out):
	// the image yield rate's terms.
	ImagesStored, PagesOnly int64
}

// Inputs returns d's priority inputs.
func (d *Domain) Inputs() PriorityInputs {
	in := PriorityInputs{Status: d.Status, SeedRank: d.SeedRank, Pending: d.Pending(), PagesCrawled: d.PagesCrawled,
		PagesNew: d.PagesNew, TotalErrorCount: d.TotalErrorCount, ImagesStored: d.ImagesStored, PagesOnly: d.PagesOnly()}
	if d.LastCrawledAt != nil {
		t := *d.LastCrawledAt
		in.LastCrawledAt = &t
	}
	return in
}

// Priority computes the priority at now of a domain with these inputs,
// with the page yield rate.
func (in PriorityInputs) Priority(now time.Time) Priority { return in.PriorityFor(now, false) }

// PriorityFor computes the priority at now of a domain with these inputs;
// with images, its yield term is the image yield rate.
func (in PriorityInputs) PriorityFor(now time.Time, images bool) Priority {
	p := Priority{Remaining: in.Pending, ImageYield: images, SeedRank: in.SeedRank, RankTerm: RankTerm(in.SeedRank)}
	if in.PagesCrawled > 0 {
		p.YieldRate = float64(in.PagesNew) / float64(in.PagesCrawled)
		p.ErrorRate = float64(in.TotalErrorCount) / float64(in.PagesCrawled)
	}
	if images {
		p.YieldRate = 0
		if in.PagesOnly > 0 {
			p.YieldRate = float64(in.ImagesStored) / float64(in.PagesOnly)
		}
	}
	last := neverCrawled
	if in.LastCrawledAt != nil {
		last = *in.LastCrawledAt
	}
	p.StalenessDays = max(now.Sub(last).Hours()/24, 0)
	if in.Status == DomainBlocked || in.Status == DomainUnreachable {
		return p
	}
	p.Scored = true
	p.Score = p.RankTerm + int(math.Round(p.YieldRate*1000)) + int(min(p.Remaining, 500))*2 -
		int(math.Round(p.ErrorRate*500)) + int(p.StalenessDays*5)
	return p
}

// RankTerm is the score's term for seed rank r (1 the best, 0 none).
func RankTerm(r int) int {
	if r <= 0 {
		return 0
	}
	return 1000 / r
}

// CandidateLess orders domains that may release (seed 004 section 6.1's
// discovery candidates): active before the others (partly crawled, the
// best to resume), then the higher score, then the least recently crawled
// (never crawled first). pa and pb are a's and b's priorities, computed
// once per pass by the caller. It reports whether the order is decided;
// ties are the caller's to break.
func CandidateLess(a, b *Domain, pa, pb Priority) (less, decided bool) {
	return CandidateLessOf(a.Status, b.Status, a.LastCrawledAt, b.LastCrawledAt, pa, pb)
}

// CandidateLessOf is CandidateLess on what it reads of the two domains:
// their statuses and last crawl times.
func CandidateLessOf(sa, sb DomainStatus, la, lb *time.Time, pa, pb Priority) (less, decided bool) {
	if aa, ba := sa == DomainActive, sb == DomainActive; aa != ba {
		return aa, true
	}
	if pa.Scored != pb.Scored {
		return pa.Scored, true
	}
	if pa.Score != pb.Score {
		return pa.Score > pb.Score, true
	}
	switch {
	case la == nil && lb == nil:
	case la == nil:
		return true, true
	case lb == nil:
		return false, true
	case !la.Equal(*lb):
		return la.Before(*lb), true
	}
	return false, false
}

// RefreshDue reports whether d is a refresh candidate at now (seed 004
// section 6.1): exhausted, and its last response (or, if it never had
// one, its last round's start) at least interval ago. interval <= 0 means
// never.
func RefreshDue(d *Domain, interval time.Duration, now time.Time) bool {
	if interval <= 0 || d.Status != DomainExhausted || d.Pending() > 0 || len(d.InFlight) > 0 {
		return false
	}
	return !now.Before(LastActivity(d).Add(interval))
}

// LastActivity is when the domain was last crawled: its last response,
// else the start of its round, else when it was first seen.
func LastActivity(d *Domain) time.Time {
	switch {
	case d.LastCrawledAt != nil:
		return *d.LastCrawledAt
	case d.RoundStartedAt != nil:
		return *d.RoundStartedAt
	}
	return d.FirstSeenAt
}

// SortRefreshCandidates orders refresh candidates as seed 004 section 6.1
// does: highest yield rate first (domains never crawled last), then the
// stalest first, then by name.
func SortRefreshCandidates(ds []*Domain) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		ya, yb := -1.0, -1.0
		if a.PagesCrawled > 0 {
			ya = float64(a.PagesNew) / float64(a.PagesCrawled)
		}
		if b.PagesCrawled > 0 {
			yb = float64(b.PagesNew) / float64(b.PagesCrawled)
		}
		if ya != yb {
			return ya > yb
		}
		la, lb := LastActivity(a), LastActivity(b)
		if !la.Equal(lb) {
			return la.Before(lb)
		}
		return a.Domain < b.Domain
	})
}
