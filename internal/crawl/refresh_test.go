package crawl

import (
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

func TestRoundJobID(t *testing.T) {
	u := "http://a.test/x"
	if RoundJobID("src-n", u, 0) != FetchJobID("src-n", u) {
		t.Error("round 0 must keep the original ID")
	}
	id := RoundJobID("src-n", u, 12)
	if !strings.HasSuffix(id, ".12") {
		t.Errorf("id %s", id)
	}
	if err := job.ValidateID(id); err != nil {
		t.Error(err)
	}
	kind, name, ok := ParseJobID(id)
	if !ok || kind != KindFetch || name != "src-n" {
		t.Errorf("parse %s: %s %s %v", id, kind, name, ok)
	}
	for _, bad := range []string{FetchJobID("n", u) + ".", FetchJobID("n", u) + ".0", FetchJobID("n", u) + ".x", FetchJobID("n", u) + ".01"} {
		if _, _, ok := ParseJobID(bad); ok {
			t.Errorf("%s parsed", bad)
		}
	}
}

func TestPriority(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	last := now.Add(-30 * 24 * time.Hour)
	d := NewDomain("a.test", "a.test", now)
	d.Status, d.PagesCrawled, d.PagesNew, d.TotalErrorCount, d.LastCrawledAt = DomainExhausted, 10, 5, 2, &last
	p := PriorityOf(d, now)
	// 0.5*1000 + 0 - 0.2*500 + 30*5
	if !p.Scored || p.Score != 500-100+150 {
		t.Errorf("score %+v", p)
	}
	d.Status = DomainBlocked
	if PriorityOf(d, now).Scored {
		t.Error("blocked domains have no score")
	}
	d.Status = DomainExhausted
	if !RefreshDue(d, 14*24*time.Hour, now) || RefreshDue(d, 31*24*time.Hour, now) || RefreshDue(d, 0, now) {
		t.Error("RefreshDue")
	}
	older := now.Add(-60 * 24 * time.Hour)
	e := NewDomain("b.test", "b.test", now)
	e.Status, e.PagesCrawled, e.PagesNew, e.LastCrawledAt = DomainExhausted, 10, 5, &older
	f := NewDomain("c.test", "c.test", now)
	f.Status, f.PagesCrawled, f.PagesNew, f.LastCrawledAt = DomainExhausted, 10, 9, &last
	ds := []*Domain{d, e, f}
	SortRefreshCandidates(ds)
	if ds[0] != f || ds[1] != e || ds[2] != d {
		t.Errorf("order %s %s %s: want yield first, then staleness", ds[0].Domain, ds[1].Domain, ds[2].Domain)
	}
}
