package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/robots"
)

// Sitemap kinds (the root element).
const (
	SitemapURLSet = "urlset"
	SitemapIndex  = "sitemapindex"
)

// SitemapEntry is a <url> of a urlset or a <sitemap> of an index.
type SitemapEntry struct {
	Loc     string
	LastMod *time.Time
}

// errNotSitemap: the body is not sitemap XML.
var errNotSitemap = errors.New("not a sitemap")

// ParseSitemap reads a sitemap (gzip-compressed or not) of at most
// maxBytes once decompressed. It returns its kind, up to maxEntries
// entries (their <loc> resolved against base, http and https only) and how
// many more there were. A body that is not sitemap XML, or gzip of more
// than maxBytes, is an error: nothing of it is used.
func ParseSitemap(base string, body []byte, maxBytes int64, maxEntries int) (kind string, entries []SitemapEntry, dropped int, err error) {
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return "", nil, 0, fmt.Errorf("%w: bad gzip: %v", errNotSitemap, err)
		}
		plain, err := io.ReadAll(io.LimitReader(zr, maxBytes+1))
		if err != nil {
			return "", nil, 0, fmt.Errorf("%w: bad gzip: %v", errNotSitemap, err)
		}
		if int64(len(plain)) > maxBytes {
			return "", nil, 0, errTooLarge(maxBytes)
		}
		body = plain
	}
	baseURL, err := url.Parse(base)
	if err != nil {
		return "", nil, 0, err
	}
	dec := xml.NewDecoder(bytes.NewReader(body))
	var (
		inEntry bool
		field   string // "loc" or "lastmod" inside an entry
		text    strings.Builder
		cur     SitemapEntry
		curLoc  string
	)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", nil, 0, fmt.Errorf("%w: %v", errNotSitemap, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			switch {
			case kind == "":
				if name != SitemapURLSet && name != SitemapIndex {
					return "", nil, 0, fmt.Errorf("%w: root element <%s>", errNotSitemap, name)
				}
				kind = name
			case !inEntry && (kind == SitemapURLSet && name == "url" || kind == SitemapIndex && name == "sitemap"):
				inEntry, cur, curLoc = true, SitemapEntry{}, ""
			case inEntry && (name == "loc" || name == "lastmod"):
				field = name
				text.Reset()
			}
		case xml.CharData:
			if field != "" && text.Len() < 4096 {
				text.Write(t)
			}
		case xml.EndElement:
			name := t.Name.Local
			switch {
			case field != "" && name == field:
				v := strings.TrimSpace(text.String())
				if field == "loc" {
					curLoc = v
				} else if lm, ok := ParseLastMod(v); ok {
					cur.LastMod = &lm
				}
				field = ""
			case inEntry && (name == "url" || name == "sitemap"):
				inEntry = false
				if u, ok := absoluteHTTP(baseURL, curLoc); ok {
					if len(entries) >= maxEntries {
						dropped++
					} else {
						cur.Loc = u
						entries = append(entries, cur)
					}
				}
			}
		}
	}
	if kind == "" {
		return "", nil, 0, fmt.Errorf("%w: no root element", errNotSitemap)
	}
	return kind, entries, dropped, nil
}

func errTooLarge(n int64) error {
	return fmt.Errorf("%w: over %d bytes", errSitemapTooLarge, n)
}

var errSitemapTooLarge = errors.New("sitemap too large")

func absoluteHTTP(base *url.URL, loc string) (string, bool) {
	if loc == "" {
		return "", false
	}
	u, err := base.Parse(loc)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false
	}
	return u.String(), true
}

// lastModLayouts are the W3C Datetime forms a <lastmod> may take.
var lastModLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02", "2006-01", "2006"}

// ParseLastMod reads a <lastmod> value (W3C Datetime) as UTC.
func ParseLastMod(v string) (time.Time, bool) {
	for _, l := range lastModLayouts {
		if t, err := time.Parse(l, v); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// readSitemaps fetches the sitemaps of p.Origin after its robots.txt: the
// ones robots.txt lists, or /sitemap.xml when it lists none, then the
// sitemaps their indexes name, breadth first, within the limits of
// sitemap.go in internal/crawl. Only sitemaps of the job's domain are
// fetched (each request passes the domain's gate); one robots.txt
// disallows (for the crawl's user agent) is not. Nothing here fails the
// job: each sitemap's fate is in art.Sitemaps.
func (rh *RobotsHandler) readSitemaps(ctx context.Context, st *crawl.Store, p *crawl.RobotsPrompt, art *crawl.RobotsArtifact) {
	if art.Verdict == crawl.RobotsDisallowAll {
		return
	}
	var rules *robots.Robots
	if r, err := st.LoadRobots(art.Verdict, art.BodySHA256); err == nil {
		rules = r
	} else {
		return
	}
	type item struct {
		url   string
		depth int
	}
	var todo []item
	for _, s := range rules.Sitemaps() {
		todo = append(todo, item{s, 1})
	}
	if len(todo) == 0 {
		todo = append(todo, item{strings.TrimSuffix(p.Origin, "/") + "/sitemap.xml", 1})
	}
	seen := map[string]bool{}
	fetches := 0
	// The interval the frontier will use from now on: robots.txt's
	// Crawl-delay (capped) counts already.
	interval := time.Duration(p.MinIntervalMS) * time.Millisecond
	if cd, ok := rules.CrawlDelay(p.UserAgent); ok {
		if cd = min(cd, time.Duration(p.MaxCrawlDelayMS)*time.Millisecond); cd > interval {
			// robots.txt went out with the shorter interval: the first
			// sitemap waits the Crawl-delay from (about) now.
			interval = cd
			_ = rh.Handler.Gates.HoldUntil(p.Domain, time.Now().Add(interval))
		}
	}
	for len(todo) > 0 && ctx.Err() == nil {
		it := todo[0]
		todo = todo[1:]
		if seen[it.url] {
			continue
		}
		seen[it.url] = true
		sf := crawl.SitemapFetch{URL: it.url, Depth: it.depth}
		u, err := url.Parse(it.url)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			sf.ErrorCode, sf.Error = crawl.ErrCodeBadURL, "not an http(s) URL"
		case !sameDomain(it.url, p.Domain):
			sf.ErrorCode, sf.Error = crawl.ErrCodeBadURL, "on another domain than "+p.Domain+": not fetched"
		case !allowedBy(rules, p.UserAgent, u):
			sf.ErrorCode, sf.Error = crawl.ErrCodeRobots, "disallowed by robots.txt"
		case fetches >= crawl.MaxSitemapFetches:
			sf.ErrorCode, sf.Error = crawl.ErrCodeTooLarge, fmt.Sprintf("more than %d sitemaps: not fetched", crawl.MaxSitemapFetches)
		default:
			fetches++
			children := rh.readSitemap(ctx, st, p, interval, &sf, art)
			for _, c := range children {
				todo = append(todo, item{c, it.depth + 1})
			}
		}
		art.Sitemaps = append(art.Sitemaps, sf)
	}
}

// readSitemap fetches and parses one sitemap into sf; a urlset's URLs go
// to art, an index's sitemaps are returned (if not nested too deep).
func (rh *RobotsHandler) readSitemap(ctx context.Context, st *crawl.Store, p *crawl.RobotsPrompt, interval time.Duration, sf *crawl.SitemapFetch, art *crawl.RobotsArtifact) []string {
	tk, err := rh.Handler.wait(ctx, p.Domain, interval, p.MaxInFlightPerDomain)
	if err != nil {
		sf.ErrorCode, sf.Error = crawl.ErrCodeNetwork, "not sent: "+err.Error()
		return nil
	}
	res, err := rh.Handler.do(ctx, tk, sf.URL, p.UserAgent, p.Resolve, p.AllowPrivate, p.ConnectTimeoutMS, p.TimeoutMS, crawl.MaxSitemapBytes)
	sf.FetchedAt, sf.DurationMS = res.start.UTC().Format(time.RFC3339Nano), res.dur.Milliseconds()
	if err != nil {
		sf.ErrorCode, sf.Error = classify(err), err.Error()
		return nil
	}
	sf.HTTPStatus = res.status
	switch {
	case res.status < 200 || res.status >= 300:
		sf.Error = fmt.Sprintf("answered %d", res.status)
		return nil
	case res.truncated:
		sf.ErrorCode, sf.Error = crawl.ErrCodeTooLarge, fmt.Sprintf("over %d bytes: refused", crawl.MaxSitemapBytes)
		return nil
	}
	kind, entries, dropped, err := ParseSitemap(sf.URL, res.body, crawl.MaxSitemapBytes, crawl.MaxSitemapURLs)
	if err != nil {
		sf.ErrorCode, sf.Error = crawl.ErrCodeNotSitemap, err.Error()
		if errors.Is(err, errSitemapTooLarge) {
			sf.ErrorCode, sf.Error = crawl.ErrCodeTooLarge, err.Error()+" once decompressed: refused"
		}
		return nil
	}
	sf.Kind, sf.Dropped = kind, dropped
	if kind == SitemapIndex {
		if sf.Depth >= crawl.MaxSitemapDepth {
			sf.ErrorCode, sf.Error = crawl.ErrCodeTooLarge, fmt.Sprintf("index nested deeper than %d: not followed", crawl.MaxSitemapDepth)
			sf.Dropped += len(entries)
			return nil
		}
		out := make([]string, len(entries))
		for i, e := range entries {
			out[i] = e.Loc
		}
		sf.URLs = len(out)
		return out
	}
	for _, e := range entries {
		if len(art.SitemapURLs) >= crawl.MaxSitemapURLsPerJob {
			sf.Dropped++
			continue
		}
		art.SitemapURLs = append(art.SitemapURLs, crawl.SitemapURL{URL: e.Loc, LastMod: e.LastMod, From: sf.URL})
		sf.URLs++
	}
	return nil
}

func sameDomain(rawURL, dom string) bool {
	d, _, err := crawl.DomainOf(rawURL)
	return err == nil && d == dom
}

func allowedBy(r *robots.Robots, ua string, u *url.URL) bool {
	ok, _ := r.Allowed(ua, u.RequestURI())
	return ok
}
