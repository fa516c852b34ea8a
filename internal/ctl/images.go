package ctl

import (
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/job"
)

// DomainImages are a domain's image counters and rates (docs/CRAWL.md,
// "Images"), in crawl status --json's per-domain rows and in domains
// --by priority|yield: images_found counts the image URLs its pages
// referenced, images_stored the images fetched for its pages (2xx,
// image/*), both rates per page crawled (page requisites left out).
type DomainImages struct {
	ImagesFound      int64   `json:"images_found"`
	ImagesStored     int64   `json:"images_stored"`
	ImageYieldRate   float64 `json:"image_yield_rate"`
	AvgImagesPerPage float64 `json:"avg_images_per_page"`
}

func domainImages(d *crawl.Domain) DomainImages {
	return DomainImages{ImagesFound: d.ImagesFound, ImagesStored: d.ImagesStored,
		ImageYieldRate: d.ImageYieldRate(), AvgImagesPerPage: d.AvgImagesPerPage()}
}

// CrawlImages are a crawl's image totals and the page requisites it
// fetches, in crawl status.
type CrawlImages struct {
	PageRequisites []string `json:"page_requisites,omitempty"`
	ImagesFound    int64    `json:"images_found"`
	ImagesStored   int64    `json:"images_stored"`
}

// imageYield tells, per crawl, whether its priority's yield term is the
// image yield rate (the crawl fetches images); a crawl.json that cannot
// be read counts as not.
type imageYield struct {
	s *job.Spool
	m map[string]bool
}

func (y *imageYield) of(name string) bool {
	if v, ok := y.m[name]; ok {
		return v
	}
	if y.m == nil {
		y.m = map[string]bool{}
	}
	v := false
	if st, err := crawl.Open(y.s, name); err == nil {
		if cr, err := st.Load(); err == nil {
			v = cr.FetchesImages()
		}
	}
	y.m[name] = v
	return v
}

// shownImages are what domain show adds to the entity (which has
// images_found of its own).
type shownImages struct {
	ImagesStored     int64   `json:"images_stored"`
	ImageYieldRate   float64 `json:"image_yield_rate"`
	AvgImagesPerPage float64 `json:"avg_images_per_page"`
}

// showImages are the image counters of domain show: images_stored is
// summed over every domain file of the crawl (crawl.SumImagesStored), read
// only when the crawl fetches images (otherwise nothing is stored).
func showImages(st *crawl.Store, cr *crawl.Crawl, d *crawl.Domain) shownImages {
	if cr != nil && cr.FetchesImages() {
		if doms, err := st.Domains(); err == nil {
			for _, o := range doms {
				if o.Domain == d.Domain {
					d.ImagesStored = o.ImagesStored
				}
			}
		}
	}
	return shownImages{ImagesStored: d.ImagesStored, ImageYieldRate: d.ImageYieldRate(), AvgImagesPerPage: d.AvgImagesPerPage()}
}
