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
