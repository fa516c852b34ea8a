package dashboard

import (
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// TestDomainTablePagesAfterRefreshRounds: a domain fetched three times
// over (two refresh rounds of its 5 pages) shows 5 pages crawled of 5
// discovered on the crawl's page, not 15 of 5.
func TestDomainTablePagesAfterRefreshRounds(t *testing.T) {
	f := newFixture(t, false)
	c := crawl.New("rounds")
	c.Seeds = []crawl.Seed{{URL: "http://a.test/"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	st, err := crawl.Open(f.s, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	d := crawl.NewDomain("a.test", "a.test", time.Now().UTC())
	d.Status, d.Round = crawl.DomainExhausted, 2
	d.PagesDiscovered, d.PagesReleased, d.PagesCrawled, d.PagesRecrawled = 5, 15, 15, 10
	if err := st.WriteDomain(d, true); err != nil {
		t.Fatal(err)
	}
	code, body := f.get("/crawls/rounds")
	if code != 200 {
		t.Fatalf("GET /crawls/rounds: %d %s", code, body)
	}
	row := `<tr class="domain"><td>a.test</td><td>exhausted</td><td class="n">5</td><td class="n">5</td>`
	if !strings.Contains(body, row) {
		i := strings.Index(body, `<tr class="domain">`)
		t.Errorf("domain row: want %s, got %.200s", row, body[max(i, 0):])
	}
}

// TestDomainTableNextOfAPausedCrawl: a paused crawl's active domain with
// URLs pending says "paused" as its next allowed request, not a time
// already past (which reads as "now"); once resumed it says "now".
func TestDomainTableNextOfAPausedCrawl(t *testing.T) {
	f := newFixture(t, false)
	c := crawl.New("held")
	c.Seeds = []crawl.Seed{{URL: "http://a.test/"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	st, err := crawl.Open(f.s, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	past := time.Now().UTC().Add(-time.Hour)
	d := crawl.NewDomain("a.test", "a.test", past)
	d.Status, d.NextReleaseAt = crawl.DomainActive, &past
	d.Queue = []*crawl.Segment{{File: "0_0.jsonl", Count: 3, Consumed: 1}}
	if err := st.WriteDomain(d, true); err != nil {
		t.Fatal(err)
	}
	row := func() string {
		_, body := f.get("/crawls/held")
		i := strings.Index(body, `<tr class="domain">`)
		if i < 0 {
			t.Fatalf("no domain row: %s", body)
		}
		j := strings.Index(body[i:], "</tr>")
		return body[i : i+j]
	}
	for _, tc := range []struct {
		state crawl.State
		want  string
	}{{crawl.Paused, "<td>paused</td>"}, {crawl.Running, "<td>now</td>"}} {
		if _, err := st.Update(func(c *crawl.Crawl) error { c.State = tc.state; return nil }); err != nil {
			t.Fatal(err)
		}
		if r := row(); !strings.Contains(r, tc.want) {
			t.Errorf("%s crawl: row %s, want %s", tc.state, r, tc.want)
		}
	}
}
