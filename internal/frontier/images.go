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
			d.noteImageStored(fl.ForDomain, 1)
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

// The images stored for a page domain are counted in the files of the
// images' domains (ImagesStoredFor), so no one domain file holds the sum:
// the driver keeps it (imagesStored: page domain -> sum), built by the
// start's scan of every domain file (addImagesStored, from loadDomain),
// set on the summaries once the scan is over (settleImagesStored) and on
// each entity the cache reads (get), and counted up as images are stored
// (noteImageStored).

// addImagesStored adds what domain file dd counts for page domains.
func (d *driver) addImagesStored(dd *crawl.Domain) {
	for page, n := range dd.ImagesStoredFor {
		d.imagesStored[page] += n
	}
}

// settleImagesStored gives every summary and cached entity its sum, once
// every domain file has been read.
func (d *driver) settleImagesStored() {
	for name, s := range d.sums {
		s.in.ImagesStored = d.imagesStored[name]
	}
	for name, el := range d.cache {
		el.Value.(*dom).d.ImagesStored = d.imagesStored[name]
	}
}

// noteImageStored counts n images stored for page domain name.
func (d *driver) noteImageStored(name string, n int64) {
	d.imagesStored[name] += n
	if s := d.sums[name]; s != nil {
		s.in.ImagesStored += n
	}
	if el := d.cache[name]; el != nil {
		el.Value.(*dom).d.ImagesStored += n
	}
}
