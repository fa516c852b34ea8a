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
