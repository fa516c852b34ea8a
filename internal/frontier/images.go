package frontier

import (
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// Images and other page requisites (crawl/images.go, docs/CRAWL.md
// "Images"): a page's images_found is counted on its domain whatever the
// crawl's options; with page_requisites, its images (stylesheets,
// scripts) are discovered as URLs at the page's depth, marked as
// requisites of the page's domain, and an image stored counts on that
// domain.

// pageRequisites counts a page's images and queues the requisites the
// crawl fetches; out is the page's outcome line. A requisite's own
// response counts as a requisite crawled, and an image stored is counted
// in its domain's file for the page's domain (written atomically with
// the job leaving flight; the page's domain sees the sum).
func (d *driver) pageRequisites(dm *dom, fl *crawl.Flight, art *crawl.Artifact, out *crawl.Outcome, now time.Time) {
	dd := dm.d
	if fl.Requisite != "" {
		dd.RequisitesCrawled++
		if crawl.ImageStored(fl.RequisiteRef, art) {
			out.ImageStored = true
			if dd.ImagesStoredFor == nil {
				dd.ImagesStoredFor = map[string]int64{}
			}
			dd.ImagesStoredFor[fl.ForDomain]++
			if p := d.domains[fl.ForDomain]; p != nil {
				p.d.ImagesStored++
			}
		}
		return
	}
	dd.ImagesFound += int64(art.ImagesFound)
	out.Images = art.ImagesFound
	queue := func(kind string, urls []string) {
		if !d.cfg.Fetches(kind) {
			return
		}
		ref := crawl.RequisiteRef{Requisite: kind, ForDomain: dd.Domain}
		for _, u := range urls {
			// At the page's depth: a requisite is never too deep when its
			// page was not.
			d.discoverAs(u, art.Depth, 0, 0, art.NormalizedURL, ref, now)
		}
	}
	queue(crawl.RequisiteImages, art.Images)
	queue(crawl.RequisiteCSS, art.Stylesheets)
	queue(crawl.RequisiteScripts, art.Scripts)
}

// sumImagesStored recomputes every domain's images_stored from the
// domains' ImagesStoredFor (after the domains are loaded).
func (d *driver) sumImagesStored() {
	ds := make([]*crawl.Domain, 0, len(d.domains))
	for _, dm := range d.domains {
		ds = append(ds, dm.d)
	}
	crawl.SumImagesStored(ds)
}
