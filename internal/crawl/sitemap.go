package crawl

import (
	"encoding/json"
	"time"
)

// Sitemaps (sitemaps.org protocol) are read by the crawl.robots job of an
// origin, right after its robots.txt: the sitemaps robots.txt lists
// ("Sitemap:" lines), or /sitemap.xml when it lists none. Indexes are
// followed, gzip-compressed sitemaps decompressed. Every fetch is bounded
// by the limits below and passes the domain's gate like any request.
const (
	// MaxSitemapBytes caps one sitemap, after decompression (the
	// protocol's own limit is 50 MB): a longer one is refused whole.
	MaxSitemapBytes = 10 << 20
	// MaxSitemapURLs caps the URLs (or child sitemaps) taken from one
	// sitemap (the protocol's limit); the rest are ignored.
	MaxSitemapURLs = 50000
	// MaxSitemapURLsPerJob caps the URLs one robots job hands the
	// frontier, over all its sitemaps (result.json stays well under
	// MaxResultFileSize).
	MaxSitemapURLsPerJob = 100000
	// MaxSitemapDepth is how deep indexes nest: 1 is a sitemap named by
	// robots.txt (or /sitemap.xml); a sitemap an index names is one
	// deeper; an index at MaxSitemapDepth is not followed.
	MaxSitemapDepth = 2
	// MaxSitemapFetches caps the sitemap requests of one robots job.
	MaxSitemapFetches = 16
	// SitemapDepth is the crawl depth of a URL found in a sitemap: one
	// link away from the site's root.
	SitemapDepth = 1
	// SitemapsFile records the lastmod of every in-scope sitemap URL.
	SitemapsFile = "sitemaps.jsonl"
)

// ErrCodeNotSitemap: a sitemap that is not sitemap XML (or gzip of it).
const ErrCodeNotSitemap = "not_a_sitemap"

// SitemapFetch is one sitemap request of a robots job, in its artifact.
type SitemapFetch struct {
	URL        string `json:"url"`
	Depth      int    `json:"depth"`                 // 1: named by robots.txt (or /sitemap.xml)
	Kind       string `json:"kind,omitempty"`        // urlset or sitemapindex
	HTTPStatus int    `json:"http_status"`           // 0: not sent or network failure
	URLs       int    `json:"urls"`                  // URLs (or child sitemaps) taken from it
	Dropped    int    `json:"dropped,omitempty"`     // entries over the limits
	Error      string `json:"error,omitempty"`       // why nothing (or not all) was taken
	ErrorCode  string `json:"error_code,omitempty"`  // too_large, not_a_sitemap, ...
	FetchedAt  string `json:"fetched_at,omitempty"`  // RFC 3339, when the request was sent
	DurationMS int64  `json:"duration_ms,omitempty"` //
}

// SitemapURL is one <url> of a sitemap: its <loc>, absolute, and its
// <lastmod> when it has a valid one.
type SitemapURL struct {
	URL     string     `json:"url"`
	LastMod *time.Time `json:"lastmod,omitempty"`
	From    string     `json:"from"` // the sitemap
}

// SitemapLine is one line of sitemaps.jsonl: a normalized, in-scope URL
// a sitemap listed, with its lastmod, when the frontier read it.
type SitemapLine struct {
	Time    time.Time `json:"time"`
	URL     string    `json:"url"`
	Domain  string    `json:"domain"`
	LastMod time.Time `json:"lastmod"`
}

// ScanSitemapLines calls fn for every complete line of sitemaps.jsonl.
func (st *Store) ScanSitemapLines(fn func(l *SitemapLine)) error {
	return st.scanJSONLines(SitemapsFile, func(line []byte) bool {
		var l SitemapLine
		if json.Unmarshal(line, &l) == nil && l.URL != "" {
			fn(&l)
		}
		return true
	})
}
