package ctl_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
)

// TestDomainsImages: domains --by yield shows each domain's images
// (stored/found) and image yield rate, and in a crawl that fetches images
// orders by the image yield rate (the priority's yield term); crawl
// status --json carries the image counters per domain and in total.
func TestDomainsImages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cr := crawl.New("pics")
	cr.Seeds = []crawl.Seed{{URL: "http://p.example/"}}
	cr.PageRequisites = []string{"images"}
	if err := cr.Validate(); err != nil {
		t.Fatal(err)
	}
	st, err := crawl.Open(e.s, "pics")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Create(cr); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	// p.example: 10 pages (all new), 14 images found, 6 stored (4 by
	// itself, 2 by cdn.example): image yield 0.6. q.example: 10 pages, 1
	// new, 20 images found, 9 stored: page yield 0.1, image yield 0.9.
	p := crawl.NewDomain("p.example", "p.example", now)
	p.Status, p.PagesCrawled, p.RequisitesCrawled, p.PagesNew, p.ImagesFound = crawl.DomainExhausted, 14, 4, 14, 14
	p.ImagesStoredFor = map[string]int64{"p.example": 4}
	q := crawl.NewDomain("q.example", "q.example", now)
	q.Status, q.PagesCrawled, q.PagesNew, q.ImagesFound = crawl.DomainExhausted, 10, 1, 20
	cdn := crawl.NewDomain("cdn.example", "cdn.example", now)
	cdn.Status, cdn.PagesCrawled, cdn.RequisitesCrawled, cdn.PagesNew = crawl.DomainExhausted, 11, 11, 11
	cdn.ImagesStoredFor = map[string]int64{"p.example": 2, "q.example": 9}
	for _, d := range []*crawl.Domain{p, q, cdn} {
		e.writeDomain("pics", d)
	}

	if err := e.ctl("").Domains(ctl.DomainsOptions{By: "yield", JSON: true}); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Domain     string  `json:"domain"`
		Yield      float64 `json:"yield_rate"`
		ImageYield bool    `json:"image_yield"`
		Found      int64   `json:"images_found"`
		Stored     int64   `json:"images_stored"`
		Rate       float64 `json:"image_yield_rate"`
		Avg        float64 `json:"avg_images_per_page"`
	}
	var rows []row
	for _, l := range strings.Split(strings.TrimSpace(e.stdout.String()), "\n") {
		var r row
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 3 || rows[0].Domain != "q.example" || rows[1].Domain != "p.example" {
		t.Fatalf("domains --by yield in an image crawl: %+v, want q (image yield 0.9) before p (0.6)", rows)
	}
	if r := rows[1]; !r.ImageYield || r.Yield != 0.6 || r.Found != 14 || r.Stored != 6 || r.Rate != 0.6 || r.Avg != 1.4 {
		t.Errorf("p.example: %+v", r)
	}
	e.stdout.Reset()
	if err := e.ctl("").Domains(ctl.DomainsOptions{By: "yield"}); err != nil {
		t.Fatal(err)
	}
	out := e.stdout.String()
	if h := strings.Split(out, "\n")[0]; !strings.Contains(h, "IMAGES") || !strings.Contains(h, "IMG YIELD") {
		t.Errorf("header: %s", h)
	}
	// YIELD stays the page yield; IMAGES is stored/found.
	if f := strings.Fields(domainRow(t, out, "q.example")); len(f) < 8 || f[3] != "0.10" || f[6] != "9/20" || f[7] != "0.90" {
		t.Errorf("q.example row: %q", f)
	}

	e.stdout.Reset()
	if err := e.ctl("").CrawlStatus("pics", true); err != nil {
		t.Fatal(err)
	}
	var sum struct {
		PageRequisites []string `json:"page_requisites"`
		Found          int64    `json:"images_found"`
		Stored         int64    `json:"images_stored"`
		PerDomain      []row    `json:"per_domain"`
	}
	if err := json.Unmarshal(e.stdout.Bytes(), &sum); err != nil {
		t.Fatal(err)
	}
	if strings.Join(sum.PageRequisites, ",") != "images" || sum.Found != 34 || sum.Stored != 15 || len(sum.PerDomain) != 3 {
		t.Fatalf("crawl status --json: %+v", sum)
	}
	for _, r := range sum.PerDomain {
		if r.Domain == "q.example" && (r.Found != 20 || r.Stored != 9 || r.Rate != 0.9 || r.Avg != 2) {
			t.Errorf("crawl status --json q.example: %+v", r)
		}
	}
	e.stdout.Reset()
	if err := e.ctl("").CrawlStatus("pics", false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.stdout.String(), "34 found, 15 stored (page requisites: images)") {
		t.Errorf("crawl status:\n%s", e.stdout)
	}
	// domain show: the entity, with images_stored summed from the domains
	// that served its images.
	e.stdout.Reset()
	if err := e.ctl("").DomainShow("pics", "p.example"); err != nil {
		t.Fatal(err)
	}
	var show struct {
		Found  int64            `json:"images_found"`
		Stored int64            `json:"images_stored"`
		For    map[string]int64 `json:"images_stored_for"`
		Rate   float64          `json:"image_yield_rate"`
	}
	if err := json.Unmarshal(e.stdout.Bytes(), &show); err != nil {
		t.Fatal(err)
	}
	if show.Found != 14 || show.Stored != 6 || show.For["p.example"] != 4 || show.Rate != 0.6 {
		t.Errorf("domain show p.example: %+v\n%s", show, e.stdout)
	}
}
