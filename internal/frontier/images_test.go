package frontier_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
)

// imageCrawl crawls the test site's images host (seeded alone) with or
// without --page-requisites images, to the end, and returns the site's
// access log, the expectation and the crawl's store.
func imageCrawl(t *testing.T, name string, images bool) ([]testsite.Request, *testsite.Expectation, *crawl.Store) {
	t.Helper()
	return imageCrawlAt(t, t.TempDir(), name, images)
}

func imageCrawlAt(t *testing.T, dir, name string, images bool) ([]testsite.Request, *testsite.Expectation, *crawl.Store) {
	t.Helper()
	site := testsite.Start(testsite.Options{})
	defer site.Close()
	e := startEnvAt(t, dir, 2)
	defer e.stop()
	cfg := testCrawl(site, name)
	cfg.Seeds = []crawl.Seed{{URL: site.URL(testsite.HostImg, "/")}}
	cfg.Delay = crawl.Duration(20 * time.Millisecond)
	// Page requisites are fetched whatever the content-type filter says.
	cfg.ContentTypes = []string{"text/html"}
	if images {
		cfg.PageRequisites = []string{"images"}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, cfg.Name)
	if err := st.Create(cfg); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	exp := site.Expected(testsite.ExpectOptions{Seeds: []string{cfg.Seeds[0].URL}, MaxDepth: cfg.MaxDepth, UserAgent: cfg.UserAgent,
		ObeyRobots: true, Images: images})
	return site.Log(), exp, st
}

// TestCrawlImages: a crawl with --page-requisites images fetches every
// image its pages reference exactly once (shared ones, srcset and
// <picture> candidates included), within scope and robots.txt, at the
// page's depth, never following an "image" that is HTML; stores them
// content-addressed; and counts images_found and images_stored on the
// domain of the pages, equal to a recount. Without the option no image is
// requested and images_found is still counted.
func TestCrawlImages(t *testing.T) {
	t.Parallel()
	imgHost := func(port int) string { return testsite.HostImg + ":" + itoa(port) }
	t.Run("with", func(t *testing.T) {
		t.Parallel()
		log, exp, st := imageCrawl(t, "images", true)
		checkCrawl(t, log, exp, nil)
		for _, k := range []string{testsite.HostImg + "/img/a.png", testsite.HostImg + "/img/b-2x.jpg", testsite.HostImg + "/img/c-big.png", testsite.HostA + "/shared.png"} {
			if !exp.Images[k] {
				t.Errorf("expectation: %s not among the images to fetch (%v)", k, exp.Images)
			}
		}
		if !exp.Denied[testsite.HostImg+"/img/private/p.png"] || exp.Fetched[testsite.HostImg+"/img/trap"] {
			t.Errorf("expectation: robots-denied %v, fetched %v", exp.Denied, exp.Fetched)
		}
		port := portOf(t, st, testsite.HostImg)
		doms, err := st.Domains()
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]*crawl.Domain{}
		for _, d := range doms {
			by[d.Domain] = d
		}
		img, a := by[imgHost(port)], by[testsite.HostA+":"+itoa(port)]
		if img == nil || a == nil {
			t.Fatalf("domains %v", by)
		}
		reqs := map[string]int64{}
		for k := range exp.Images {
			reqs[strings.SplitN(k, "/", 2)[0]]++
		}
		if img.ImagesFound != int64(exp.ImagesFound[testsite.HostImg]) || img.ImagesStored != int64(exp.ImagesStored[testsite.HostImg]) ||
			img.RequisitesCrawled != reqs[testsite.HostImg] || img.ImagesStored == 0 {
			t.Errorf("%s: images found %d stored %d, requisites crawled %d; want %d, %d, %d", img.Domain, img.ImagesFound, img.ImagesStored,
				img.RequisitesCrawled, exp.ImagesFound[testsite.HostImg], exp.ImagesStored[testsite.HostImg], reqs[testsite.HostImg])
		}
		// The image of a.site.test counts on the page's domain, and is a
		// requisite crawled of its own.
		if a.ImagesStored != 0 || a.RequisitesCrawled != 1 || a.ImagesStoredFor[img.Domain] != 1 {
			t.Errorf("%s: stored %d, requisites %d, stored for %v", a.Domain, a.ImagesStored, a.RequisitesCrawled, a.ImagesStoredFor)
		}
		pages := img.PagesCrawled - img.RequisitesCrawled
		if pages != 2 || img.ImageYieldRate() != float64(img.ImagesStored)/float64(pages) || img.AvgImagesPerPage() != float64(img.ImagesFound)/float64(pages) {
			t.Errorf("%s: %d pages, image yield %.2f, %.2f images per page", img.Domain, pages, img.ImageYieldRate(), img.AvgImagesPerPage())
		}
		if p := crawl.PriorityFor(img, time.Now(), true); !p.ImageYield || p.YieldRate != img.ImageYieldRate() {
			t.Errorf("priority with images: %+v", p)
		}
		// Each image job: at its page's depth, marked a requisite of the
		// page's domain, its body stored content-addressed when stored.
		n := 0
		if err := st.ScanOutcomes(func(o *crawl.Outcome) bool {
			if o.Requisite == "" {
				return true
			}
			n++
			if o.Requisite != crawl.RequisiteImages || o.ForDomain != img.Domain || o.Depth != exp.Depth[testsite.Key(o.URL)] {
				t.Errorf("image outcome %+v", o)
			}
			if o.ImageStored {
				if _, err := os.Stat(st.BodyPath(o.SHA256)); err != nil {
					t.Errorf("image %s stored, body: %v", o.URL, err)
				}
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if n != len(exp.Images) {
			t.Errorf("%d image outcomes, want %d", n, len(exp.Images))
		}
		recountEqual(t, st)
	})
	t.Run("without", func(t *testing.T) {
		t.Parallel()
		log, exp, st := imageCrawl(t, "noimages", false)
		checkCrawl(t, log, exp, nil)
		for _, r := range log {
			if strings.HasPrefix(r.URI, "/img/") || r.URI == "/shared.png" {
				t.Errorf("image requested without --page-requisites: %s%s", r.Host, r.URI)
			}
		}
		d, err := st.LoadDomain(imgHost(portOf(t, st, testsite.HostImg)))
		if err != nil {
			t.Fatal(err)
		}
		if d.ImagesFound == 0 || d.ImagesFound != int64(exp.ImagesFound[testsite.HostImg]) || d.ImagesStored != 0 || d.RequisitesCrawled != 0 {
			t.Errorf("%s: images found %d (want %d), stored %d, requisites %d", d.Domain, d.ImagesFound, exp.ImagesFound[testsite.HostImg], d.ImagesStored, d.RequisitesCrawled)
		}
		recountEqual(t, st)
	})
}

// TestImageCountersSurviveReplay leaves an image crawl as a SIGKILL
// can: a page's outcome line appended but its domain file not written
// (the page in flight again, its images_found not counted), and two image
// jobs likewise, one of them on another domain than its page's. A new
// frontier ingests them again: images_found, images_stored and the
// requisites crawled end as they were, equal to a recount.
func TestImageCountersSurviveReplay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, _, st := imageCrawlAt(t, dir, "replay", true)
	before := recountEqual(t, st)
	// Undo the ingestion of the last outcome of each kind wanted.
	var page, local, remote crawl.Outcome
	if err := st.ScanOutcomes(func(o *crawl.Outcome) bool {
		switch {
		case o.Outcome != crawl.OutcomeFetched:
		case o.Requisite == "" && o.Images > 0:
			page = *o
		case o.ImageStored && o.Domain == o.ForDomain:
			local = *o
		case o.ImageStored:
			remote = *o
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if page.JobID == "" || local.JobID == "" || remote.JobID == "" {
		t.Fatalf("outcomes to replay: page %+v, local image %+v, remote image %+v", page, local, remote)
	}
	for _, o := range []crawl.Outcome{page, local, remote} {
		d, err := st.LoadDomain(o.Domain)
		if err != nil {
			t.Fatal(err)
		}
		d.InFlight = append(d.InFlight, crawl.Flight{ID: o.JobID, Kind: crawl.KindFetch, URL: o.URL, Depth: o.Depth, ReleasedAt: o.Time,
			From: o.Referrer, RequisiteRef: o.RequisiteRef})
		d.PagesCrawled--
		d.PagesNew--
		d.StatusCounts[itoa(o.HTTPStatus)]--
		if o.Requisite == "" {
			d.ImagesFound -= int64(o.Images)
		} else {
			d.RequisitesCrawled--
			d.ImagesStoredFor[o.ForDomain]--
		}
		if err := st.WriteDomain(d, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Update(func(c *crawl.Crawl) error { c.State = crawl.Paused; return nil }); err != nil {
		t.Fatal(err)
	}
	if stored, _ := st.Stored(); stored.Domains[page.Domain].ImagesStored != before.Domains[page.Domain].ImagesStored-2 {
		t.Fatalf("images_stored of %s not undone: %+v", page.Domain, stored.Domains[page.Domain])
	}
	e := startEnvAt(t, dir, 2)
	waitIdle(t, st)
	e.stop()
	after := recountEqual(t, st)
	for name, b := range before.Domains {
		if a := after.Domains[name]; a == nil || a.ImageCounts != b.ImageCounts || a.Crawled != b.Crawled {
			t.Errorf("domain %s: before %+v, after %+v", name, b, a)
		}
	}
}

// portOf returns the port of host's domain in the crawl.
func portOf(t *testing.T, st *crawl.Store, host string) int {
	t.Helper()
	cr, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	for hp := range cr.Resolve {
		if h, p, ok := strings.Cut(hp, ":"); ok && h == host {
			if n, err := strconv.Atoi(p); err == nil {
				return n
			}
		}
	}
	t.Fatalf("no --resolve entry for %s", host)
	return 0
}

// TestImagesCountTowardMaxPages: page requisites are URL jobs like any
// other, so max_pages bounds pages and images together.
func TestImagesCountTowardMaxPages(t *testing.T) {
	t.Parallel()
	site := testsite.Start(testsite.Options{})
	defer site.Close()
	e := startEnv(t, 2)
	defer e.stop()
	cfg := testCrawl(site, "budget")
	cfg.Seeds = []crawl.Seed{{URL: site.URL(testsite.HostImg, "/")}}
	cfg.Delay = crawl.Duration(20 * time.Millisecond)
	cfg.PageRequisites = []string{"images"}
	cfg.MaxPages = 5
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, cfg.Name)
	if err := st.Create(cfg); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	var pages, images int
	for _, r := range site.Log() {
		switch {
		case testsite.IsRobots(r):
		case strings.HasPrefix(r.URI, "/img/") || r.URI == "/shared.png":
			images++
		default:
			pages++
		}
	}
	if pages+images != int(cfg.MaxPages) || images == 0 {
		t.Errorf("%d pages and %d images requested; want %d in all, images among them", pages, images, cfg.MaxPages)
	}
}
