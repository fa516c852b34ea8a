package crawl

import (
	"strings"
	"testing"
	"time"
)

func TestRankTermAndScore(t *testing.T) {
	t.Parallel()
	for r, want := range map[int]int{0: 0, -3: 0, 1: 1000, 2: 500, 10: 100, 1000: 1, 1001: 0, 1000000: 0} {
		if got := RankTerm(r); got != want {
			t.Errorf("RankTerm(%d) = %d, want %d", r, got, want)
		}
	}
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	d := NewDomain("a.test", "a.test", now)
	base := PriorityOf(d, now).Score
	d.SeedRank = 4
	p := PriorityOf(d, now)
	if p.Score != base+250 || p.SeedRank != 4 || p.RankTerm != 250 {
		t.Errorf("rank 4: score %d (term %d, rank %d), want %d+250", p.Score, p.RankTerm, p.SeedRank, base)
	}
}

func TestCandidateLess(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	mk := func(name string, st DomainStatus, rank int, crawled *time.Time) *Domain {
		d := NewDomain(name, name, now)
		d.Status, d.SeedRank, d.LastCrawledAt = st, rank, crawled
		return d
	}
	old, recent := now.Add(-48*time.Hour), now.Add(-time.Hour)
	// Expected order: active first (even a low score), then by score,
	// then never crawled before least recently crawled, blocked last.
	want := []*Domain{
		mk("active-low", DomainActive, 0, &recent),
		mk("pending-rank1", DomainPending, 1, nil),
		mk("pending-rank2", DomainPending, 2, nil),
		mk("pending-never", DomainPending, 0, nil),
		mk("exhausted-old", DomainExhausted, 0, &old),
		mk("blocked-rank1", DomainBlocked, 1, nil),
	}
	// exhausted-old: 2 days stale scores far below never crawled (since
	// 2000); pending-never ties with nobody.
	for i := range want {
		for j := range want {
			a, b := want[i], want[j]
			less, ok := CandidateLess(a, b, PriorityOf(a, now), PriorityOf(b, now))
			if i == j {
				if ok && less {
					t.Errorf("%s before itself", a.Domain)
				}
				continue
			}
			if !ok || less != (i < j) {
				t.Errorf("CandidateLess(%s, %s) = %v, %v; want %v", a.Domain, b.Domain, less, ok, i < j)
			}
		}
	}
	// Equal scores: the least recently crawled first.
	a, b := mk("a", DomainPending, 0, &old), mk("b", DomainPending, 0, &old)
	b.LastCrawledAt = &recent
	pa, pb := PriorityOf(a, now), PriorityOf(b, now)
	pb.Score = pa.Score
	if less, ok := CandidateLess(a, b, pa, pb); !ok || !less {
		t.Errorf("equal scores: the older crawl should go first")
	}
	if _, ok := CandidateLess(a, a, pa, pa); ok {
		t.Errorf("a domain against itself: decided")
	}
}

func TestAdoptSeed(t *testing.T) {
	t.Parallel()
	d := NewDomain("a.test", "a.test", time.Now())
	if d.AdoptSeed(Seed{URL: "http://a.test/"}) {
		t.Error("a seed without rank or source changed the domain")
	}
	if !d.AdoptSeed(Seed{Rank: 5, Source: "list_1"}) || d.SeedRank != 5 || d.Source != "list_1" {
		t.Errorf("first ranked seed: rank %d source %q", d.SeedRank, d.Source)
	}
	if d.AdoptSeed(Seed{Rank: 9, Source: "list_2"}) || d.SeedRank != 5 || d.Source != "list_1" {
		t.Errorf("a worse rank or a second source changed it: rank %d source %q", d.SeedRank, d.Source)
	}
	if !d.AdoptSeed(Seed{Rank: 2}) || d.SeedRank != 2 {
		t.Errorf("a better rank was not taken: %d", d.SeedRank)
	}
}

func TestSeedRankSourceValidated(t *testing.T) {
	t.Parallel()
	for _, s := range []Seed{
		{URL: "http://a.test/", Rank: -1},
		{URL: "http://a.test/", Source: "two words"},
		{URL: "http://a.test/", Source: strings.Repeat("x", MaxSourceLen+1)},
		{URL: "http://a.test/", Source: "caf\u00e9"},
	} {
		c := New("c")
		c.Seeds = []Seed{s}
		if err := c.Validate(); err == nil {
			t.Errorf("seed %+v accepted", s)
		}
	}
	c := New("c")
	c.Seeds = []Seed{{URL: "http://a.test/", Rank: 3, Source: "tranco_20260205"}}
	if err := c.Validate(); err != nil {
		t.Errorf("a valid rank and source: %v", err)
	}
}
