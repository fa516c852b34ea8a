package ctl_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
)

// TestDomainsLimitAndYield: --limit keeps the first N rows of the table
// and of --by views; --by yield lists the top domains by yield rate
// (domains with nothing fetched last); an unknown --by or a negative
// --limit is a usage error.
func TestDomainsLimitAndYield(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.newCrawlWithDomains("news", "a.example")
	now := time.Now().UTC()
	for _, c := range []struct {
		name           string
		crawled, fresh int64
	}{{"a.example", 10, 1}, {"b.example", 10, 9}, {"c.example", 0, 0}, {"d.example", 4, 2}} {
		d := crawl.NewDomain(c.name, c.name, now)
		d.Status = crawl.DomainExhausted
		d.PagesCrawled, d.PagesNew = c.crawled, c.fresh
		e.writeDomain("news", d)
	}
	if err := e.ctl("").Domains(ctl.DomainsOptions{Crawl: "news", Limit: 2}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(e.stdout.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "a.example") || !strings.HasPrefix(lines[2], "b.example") {
		t.Errorf("domains --limit 2:\n%s", e.stdout)
	}
	if err := e.ctl("").Domains(ctl.DomainsOptions{By: "yield", JSON: true}); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, l := range strings.Split(strings.TrimSpace(e.stdout.String()), "\n") {
		var r struct {
			Domain string  `json:"domain"`
			Yield  float64 `json:"yield_rate"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		order = append(order, r.Domain)
	}
	if got := strings.Join(order, " "); got != "b.example d.example a.example c.example" {
		t.Errorf("domains --by yield: %s, want b d a c", got)
	}
	if err := e.ctl("").Domains(ctl.DomainsOptions{By: "yield", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimSpace(e.stdout.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "YIELD") || !strings.Contains(lines[1], "b.example") || !strings.Contains(lines[1], "0.90") {
		t.Errorf("domains --by yield --limit 1:\n%s", e.stdout)
	}
	if err := e.ctl("").Domains(ctl.DomainsOptions{By: "priority", Limit: 3}); err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Split(strings.TrimSpace(e.stdout.String()), "\n")); n != 4 {
		t.Errorf("domains --by priority --limit 3: %d lines\n%s", n, e.stdout)
	}
	for _, o := range []ctl.DomainsOptions{{By: "size"}, {Limit: -1}} {
		if err := e.ctl("").Domains(o); ctl.ExitCode(err) != ctl.ExitUsage {
			t.Errorf("%+v: %v, want a usage error", o, err)
		}
	}
}

// TestDomainsByPriorityIsReleaseOrder: --by priority lists domains in the
// frontier's release order: active first, then by score (a seed rank of 1
// outscores none), blocked last; RANK shows the seed rank, --json its
// seed_rank, rank_term and source.
func TestDomainsByPriorityIsReleaseOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.newCrawlWithDomains("ranked", "a.example")
	now := time.Now().UTC()
	recent := now.Add(-time.Hour)
	for _, c := range []struct {
		name   string
		status crawl.DomainStatus
		rank   int
	}{{"a.example", crawl.DomainPending, 0}, {"b.example", crawl.DomainPending, 1}, {"c.example", crawl.DomainActive, 0}, {"d.example", crawl.DomainBlocked, 1}} {
		d := crawl.NewDomain(c.name, c.name, now)
		d.Status, d.SeedRank, d.Source = c.status, c.rank, "list_9"
		if c.status == crawl.DomainActive {
			d.LastCrawledAt = &recent
		}
		e.writeDomain("ranked", d)
	}
	if err := e.ctl("").Domains(ctl.DomainsOptions{By: "priority"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(e.stdout.String()), "\n")
	var order []string
	for _, l := range lines[1:] {
		order = append(order, strings.Fields(l)[1])
	}
	if got := strings.Join(order, " "); got != "c.example b.example a.example d.example" {
		t.Errorf("domains --by priority: %s, want c b a d\n%s", got, e.stdout)
	}
	if !strings.Contains(lines[0], "RANK") || strings.Fields(lines[2])[4] != "1" || strings.Fields(lines[3])[4] != "-" {
		t.Errorf("RANK column:\n%s", e.stdout)
	}
	if err := e.ctl("").Domains(ctl.DomainsOptions{By: "priority", JSON: true, Limit: 2}); err != nil {
		t.Fatal(err)
	}
	var r struct {
		Domain   string `json:"domain"`
		SeedRank int    `json:"seed_rank"`
		RankTerm int    `json:"rank_term"`
		Source   string `json:"source"`
	}
	if err := json.Unmarshal([]byte(strings.Split(e.stdout.String(), "\n")[1]), &r); err != nil {
		t.Fatal(err)
	}
	if r.Domain != "b.example" || r.SeedRank != 1 || r.RankTerm != 1000 || r.Source != "list_9" {
		t.Errorf("--json row: %+v", r)
	}
}
