package crawl

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPageRequisitesValidate(t *testing.T) {
	t.Parallel()
	c := New("req")
	c.Seeds = []Seed{{URL: "http://a.test/"}}
	c.PageRequisites = []string{"scripts, Images", "images"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.PageRequisites, []string{"images", "scripts"}) || !c.FetchesImages() || c.Fetches(RequisiteCSS) {
		t.Errorf("page requisites %q", c.PageRequisites)
	}
	c.PageRequisites = []string{"images,fonts"}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), `"fonts"`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("unknown kind: %v", err)
	}
	c.PageRequisites = []string{" , "}
	if err := c.Validate(); err != nil || c.PageRequisites != nil || c.FetchesImages() {
		t.Errorf("empty: %q, %v", c.PageRequisites, err)
	}
}

func TestImageStored(t *testing.T) {
	t.Parallel()
	img := RequisiteRef{Requisite: RequisiteImages, ForDomain: "p.test"}
	ok := Artifact{Outcome: OutcomeFetched, HTTPStatus: 200, ContentType: "Image/PNG; x=y", SHA256: "ab"}
	if !ImageStored(img, &ok) {
		t.Error("a 2xx image/* with a body is stored")
	}
	for name, a := range map[string]Artifact{
		"404":          {Outcome: OutcomeFetched, HTTPStatus: 404, ContentType: "image/png", SHA256: "ab"},
		"html":         {Outcome: OutcomeFetched, HTTPStatus: 200, ContentType: "text/html", SHA256: "ab"},
		"image/ alone": {Outcome: OutcomeFetched, HTTPStatus: 200, ContentType: "image/", SHA256: "ab"},
		"no body":      {Outcome: OutcomeFetched, HTTPStatus: 200, ContentType: "image/png", ErrorCode: ErrCodeContentType},
		"refused":      {Outcome: OutcomeRefused, ContentType: "image/png"},
	} {
		if ImageStored(img, &a) {
			t.Errorf("%s: counted stored", name)
		}
	}
	if ImageStored(RequisiteRef{Requisite: RequisiteCSS}, &ok) || ImageStored(RequisiteRef{}, &ok) {
		t.Error("only an image requisite stores an image")
	}
}

// TestImageRatesAndPriority: the rates divide by pages crawled less the
// requisites; images_stored of a page's domain is summed from the domains
// that served its images; the priority's yield term is the image yield
// rate only when asked.
func TestImageRatesAndPriority(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	p := NewDomain("p.test", "p.test", now)
	cdn := NewDomain("cdn.test", "cdn.test", now)
	other := NewDomain("o.test", "o.test", now)
	p.Status, p.PagesCrawled, p.RequisitesCrawled, p.PagesNew, p.ImagesFound = DomainActive, 14, 4, 14, 30
	p.ImagesStoredFor = map[string]int64{"p.test": 3}
	cdn.ImagesStoredFor = map[string]int64{"p.test": 2, "o.test": 1, "gone.test": 7}
	SumImagesStored([]*Domain{p, cdn, other})
	if p.ImagesStored != 5 || other.ImagesStored != 1 || cdn.ImagesStored != 0 {
		t.Fatalf("images stored: p %d, o %d, cdn %d", p.ImagesStored, other.ImagesStored, cdn.ImagesStored)
	}
	if p.PagesOnly() != 10 || p.ImageYieldRate() != 0.5 || p.AvgImagesPerPage() != 3 {
		t.Errorf("pages %d, image yield %v, avg %v", p.PagesOnly(), p.ImageYieldRate(), p.AvgImagesPerPage())
	}
	if cdn.ImageYieldRate() != 0 || cdn.AvgImagesPerPage() != 0 {
		t.Error("rates of a domain with no page crawled")
	}
	pages, images := PriorityFor(p, now, false), PriorityFor(p, now, true)
	if pages.YieldRate != 1 || pages.ImageYield || images.YieldRate != 0.5 || !images.ImageYield || pages.Score-images.Score != 500 {
		t.Errorf("page yield %+v, image yield %+v", pages, images)
	}
	if PriorityOf(p, now) != pages {
		t.Error("PriorityOf is the page yield")
	}
}

// TestDiffImages: Diff names each image counter that differs.
func TestDiffImages(t *testing.T) {
	t.Parallel()
	a := &Counts{Domains: map[string]*DomainCounts{"d.test": {ImageCounts: ImageCounts{ImagesFound: 3, ImagesStored: 2, RequisitesCrawled: 2}}}}
	b := &Counts{Domains: map[string]*DomainCounts{"d.test": {ImageCounts: ImageCounts{ImagesFound: 4, ImagesStored: 1, RequisitesCrawled: 1}}}}
	got := strings.Join(a.Diff(b), "\n")
	for _, w := range []string{"domain d.test images_found: stored 3, recount 4", "domain d.test images_stored: stored 2, recount 1", "domain d.test requisites_crawled: stored 2, recount 1"} {
		if !strings.Contains(got, w) {
			t.Errorf("Diff lacks %q:\n%s", w, got)
		}
	}
	if d := a.Diff(a); d != nil {
		t.Errorf("equal counts differ: %v", d)
	}
}
