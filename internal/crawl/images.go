package crawl

import (
	"fmt"
	"mime"
	"strings"
)

// Images and other page requisites (docs/CRAWL.md, "Images").
//
// The fetcher counts the images every HTML page references (<img src>,
// <img srcset>, <source srcset> in <picture>: each distinct URL once per
// page, data: URLs left out) as the page's images_found, and keeps at most
// MaxPageImages of their URLs in the artifact. A crawl started with
// --page-requisites images (and optionally css, scripts) also queues them
// as URL jobs of their own: each goes through scope, URL filters, the
// seen-set, robots.txt, politeness and the budgets like any URL, at its
// page's depth (a requisite is never too deep when its page was not), and
// its links are never followed. An image job answered 2xx with an image/*
// type counts images_stored on the domain of the page that referenced it.

// Page requisite kinds (crawl.json page_requisites).
const (
	RequisiteImages  = "images"
	RequisiteCSS     = "css"
	RequisiteScripts = "scripts"
)

// MaxPageImages bounds the image URLs one page's artifact keeps (its
// images_found counts them all); MaxPageRequisites bounds its stylesheet
// and script URLs each.
const (
	MaxPageImages     = 1000
	MaxPageRequisites = 1000
)

// RequisiteRef marks a URL queued as a page requisite (a queue entry, a
// flight, a fetch prompt, an outcome line): its kind (images, css,
// scripts) and the domain of the page that referenced it, which its
// images_stored counts toward. Empty for every other URL.
type RequisiteRef struct {
	Requisite string `json:"requisite,omitempty"`
	ForDomain string `json:"for_domain,omitempty"`
}

// PageImages are the requisites an HTML page references, in its artifact.
type PageImages struct {
	// ImagesFound counts the distinct image URLs of the page (not capped);
	// Images lists the first MaxPageImages of them, ImagesTruncated says
	// some were left out.
	ImagesFound     int      `json:"images_found,omitempty"`
	Images          []string `json:"images,omitempty"`
	ImagesTruncated bool     `json:"images_truncated,omitempty"`
	// Stylesheets (<link rel=stylesheet href>) and Scripts (<script src>),
	// only when the crawl fetches them.
	Stylesheets []string `json:"stylesheets,omitempty"`
	Scripts     []string `json:"scripts,omitempty"`
}

// ImageOutcome is what an outcome line says about images: a page's
// images_found, or that a requisite job stored an image.
type ImageOutcome struct {
	Images      int  `json:"images,omitempty"`
	ImageStored bool `json:"image_stored,omitempty"`
}

// ParsePageRequisites reads a --page-requisites value (comma-separated
// kinds, repeated or not) into the sorted, distinct kinds.
func ParsePageRequisites(values []string) ([]string, error) {
	have := map[string]bool{}
	for _, v := range values {
		for _, k := range strings.Split(v, ",") {
			k = strings.ToLower(strings.TrimSpace(k))
			if k == "" {
				continue
			}
			switch k {
			case RequisiteImages, RequisiteCSS, RequisiteScripts:
				have[k] = true
			default:
				return nil, fmt.Errorf("page requisite %q: must be images, css or scripts", k)
			}
		}
	}
	var out []string
	for _, k := range []string{RequisiteImages, RequisiteCSS, RequisiteScripts} {
		if have[k] {
			out = append(out, k)
		}
	}
	return out, nil
}

// validatePageRequisites checks crawl.json's page_requisites.
func (c *Crawl) validatePageRequisites() error {
	ks, err := ParsePageRequisites(c.PageRequisites)
	if err != nil {
		return err
	}
	if len(ks) == 0 {
		ks = nil
	}
	c.PageRequisites = ks
	return nil
}

// Fetches reports whether the crawl fetches page requisites of kind.
func (c *Crawl) Fetches(kind string) bool {
	for _, k := range c.PageRequisites {
		if k == kind {
			return true
		}
	}
	return false
}

// FetchesImages reports whether the crawl fetches its pages' images (the
// priority's yield term is then the image yield rate).
func (c *Crawl) FetchesImages() bool { return c.Fetches(RequisiteImages) }

// IsImageType reports whether a Content-Type is image/*.
func IsImageType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(strings.SplitN(contentType, ";", 2)[0]))
	}
	return strings.HasPrefix(mt, "image/") && len(mt) > len("image/")
}

// ImageStored reports whether a requisite job's artifact stored an image:
// an image requisite answered 2xx with an image/* type and its body kept.
func ImageStored(ref RequisiteRef, art *Artifact) bool {
	return ref.Requisite == RequisiteImages && art.Outcome == OutcomeFetched &&
		art.HTTPStatus >= 200 && art.HTTPStatus < 300 && IsImageType(art.ContentType) &&
		art.SHA256 != "" && art.ErrorCode != ErrCodeContentType
}

// PagesOnly is the domain's pages crawled that were not requisites: the
// denominator of its image rates.
func (d *Domain) PagesOnly() int64 { return max(d.PagesCrawled-d.RequisitesCrawled, 0) }

// ImageYieldRate is images_stored / pages crawled (requisites left out);
// 0 before the first page.
func (d *Domain) ImageYieldRate() float64 {
	if n := d.PagesOnly(); n > 0 {
		return float64(d.ImagesStored) / float64(n)
	}
	return 0
}

// AvgImagesPerPage is images_found / pages crawled (requisites left out).
func (d *Domain) AvgImagesPerPage() float64 {
	if n := d.PagesOnly(); n > 0 {
		return float64(d.ImagesFound) / float64(n)
	}
	return 0
}

// SumImagesStored sets every domain's ImagesStored from the
// ImagesStoredFor of all of them: an image's job is ingested on the
// image's domain, whose file alone it writes (with the job's removal from
// flight, in one atomic write), so the count of the page's domain is the
// sum over the domains that served its images.
func SumImagesStored(ds []*Domain) {
	by := make(map[string]*Domain, len(ds))
	for _, d := range ds {
		d.ImagesStored = 0
		by[d.Domain] = d
	}
	for _, d := range ds {
		for page, n := range d.ImagesStoredFor {
			if p := by[page]; p != nil {
				p.ImagesStored += n
			}
		}
	}
}

// recountImages counts a fetched outcome line's images (Recount): a
// page's images_found on its domain; a requisite's response on its own
// domain, and the image it stored on its page's domain.
func recountImages(o *Outcome, dc *DomainCounts, get func(string) *DomainCounts) {
	if o.Requisite == "" {
		dc.ImagesFound += int64(o.Images)
		return
	}
	dc.RequisitesCrawled++
	if o.ImageStored {
		get(o.ForDomain).ImagesStored++
	}
}
