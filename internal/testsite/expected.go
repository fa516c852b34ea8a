package testsite

import (
	"bytes"
	"net/url"
	"strings"

	"github.com/farro-dev/farro/internal/robots"
	"github.com/farro-dev/farro/internal/urlnorm"
)

// ExpectOptions are the crawl settings Expected assumes: scope domain over
// *.site.test, seeds http://a.site.test:port/ (or Seeds).
type ExpectOptions struct {
	Seeds        []string // default: a.site.test's root
	MaxDepth     int
	MaxBodyBytes int64 // default 10 MiB
	MaxRedirects int   // default 5
	UserAgent    string
	ObeyRobots   bool
	// Unfetchable hosts: requested, but no response is ever ingested
	// (robots.txt unreachable, timeouts).
	RobotsBlocked map[string]bool
	// BlockThreshold is the crawl's block_threshold (default 5): the
	// login walls in a row that block a domain which answered a 2xx page.
	BlockThreshold int
	// Images: the crawl fetches its pages' images (--page-requisites
	// images): each at its page's depth, never followed for links.
	Images bool
}

// Expectation is what a crawl of the site must do, as host+URI strings
// ("a.site.test/p/1").
type Expectation struct {
	Fetched  map[string]bool // must be requested (once)
	Denied   map[string]bool // discovered but disallowed by robots.txt: never requested
	TooDeep  map[string]bool // discovered only beyond max depth: never requested
	Outside  map[string]bool // discovered but out of scope: never requested
	URLs     map[string]string
	Depth    map[string]int
	Redirect map[string]bool
	// LoginWalled: the hosts blocked as login_required (their first page
	// answered is a login wall, or BlockThreshold walls in a row): after
	// the wall that blocks them nothing of theirs is requested.
	LoginWalled map[string]bool
	// Images: the image URLs requested as page requisites (in Fetched
	// too). ImagesFound and ImagesStored count, by the host of the pages
	// that reference them, the distinct image URLs of each page and the
	// images answered 2xx image/* (each image once, for the first page
	// that referenced it).
	Images       map[string]bool
	ImagesFound  map[string]int
	ImagesStored map[string]int
}

// Key is the host+URI form of a URL.
func Key(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	return strings.ToLower(u.Hostname()) + u.RequestURI()
}

// Expected walks the site breadth-first as a polite crawler with these
// settings must, using the site's own link tables (not the HTML), and
// robots.txt as served.
func (s *Site) Expected(o ExpectOptions) *Expectation {
	if len(o.Seeds) == 0 {
		o.Seeds = []string{s.URL(HostA, "/")}
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 10 << 20
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = 5
	}
	if o.BlockThreshold <= 0 {
		o.BlockThreshold = 5
	}
	e := &Expectation{Fetched: map[string]bool{}, Denied: map[string]bool{}, TooDeep: map[string]bool{}, Outside: map[string]bool{},
		URLs: map[string]string{}, Depth: map[string]int{}, Redirect: map[string]bool{}, LoginWalled: map[string]bool{},
		Images: map[string]bool{}, ImagesFound: map[string]int{}, ImagesStored: map[string]int{}}
	type item struct {
		u           string
		depth, hops int
		imageOf     string // an image of a page of this host
	}
	seen := map[string]bool{}
	var queue []item
	imageOf := ""
	push := func(raw string, depth, hops int) {
		u, err := urlnorm.Normalize(raw, urlnorm.Options{})
		if err != nil {
			return
		}
		k := Key(u)
		pu, _ := url.Parse(u)
		if !strings.HasSuffix(strings.ToLower(pu.Hostname()), ".site.test") {
			e.Outside[k] = true
			return
		}
		if depth > o.MaxDepth {
			if !seen[u] {
				e.TooDeep[k] = true
			}
			return
		}
		if hops > o.MaxRedirects || seen[u] {
			return
		}
		delete(e.TooDeep, k)
		seen[u] = true
		queue = append(queue, item{u, depth, hops, imageOf})
	}
	for _, sd := range o.Seeds {
		push(sd, 0, 0)
	}
	rules := map[string]*robots.Robots{}
	answered, walls := map[string]bool{}, map[string]int{} // per host: a 2xx seen, login walls in a row
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		pu, _ := url.Parse(it.u)
		host := strings.ToLower(pu.Hostname())
		k := Key(it.u)
		if e.LoginWalled[host] {
			continue // blocked: login_required
		}
		if o.ObeyRobots {
			if o.RobotsBlocked[host] {
				continue
			}
			r := rules[host]
			if r == nil {
				r = s.robotsFor(host)
				rules[host] = r
			}
			if ok, _ := r.Allowed(o.UserAgent, pu.RequestURI()); !ok {
				e.Denied[k] = true
				continue
			}
		}
		e.Fetched[k], e.URLs[k], e.Depth[k] = true, it.u, it.depth
		resp := s.Page(host, pu.RequestURI(), 0)
		if it.imageOf != "" { // a requisite: counted, never followed
			e.Images[k] = true
			if resp.Status >= 200 && resp.Status < 300 && resp.IsImageType() {
				e.ImagesStored[it.imageOf]++
			}
			continue
		}
		switch {
		case resp.LoginWall:
			walls[host]++
			if !answered[host] || walls[host] >= o.BlockThreshold {
				e.LoginWalled[host] = true
			}
		case resp.Status >= 200 && resp.Status < 300 && !isLoginPath(pu.Path):
			walls[host] = 0
		}
		if resp.Status >= 200 && resp.Status < 300 {
			answered[host] = true
		}
		if resp.Status >= 300 && resp.Status < 400 {
			e.Redirect[k] = true
			if loc := resp.Header.Get("Location"); loc != "" {
				if t, err := urlnorm.Resolve(it.u, loc, urlnorm.Options{}); err == nil {
					push(t, it.depth, it.hops+1)
				}
			}
			continue
		}
		if resp.Status < 200 || resp.Status >= 300 || !resp.HTML || resp.Delay >= s.Opts.TooSlowDelay {
			continue
		}
		body := resp.Body
		if int64(len(body)) > o.MaxBodyBytes {
			body = body[:o.MaxBodyBytes]
		}
		for _, l := range resp.Links {
			if !bytes.Contains(body, []byte(`"`+l+`"`)) && !bytes.Contains(body, []byte(`"`+relative(l, body)+`"`)) {
				continue // cut off by the size cap
			}
			if t, err := urlnorm.Resolve(it.u, l, urlnorm.Options{}); err == nil {
				push(t, it.depth+1, 0)
			}
		}
		e.ImagesFound[host] += len(resp.Images)
		if o.Images {
			imageOf = host
			for _, im := range resp.Images {
				if t, err := urlnorm.Resolve(it.u, im, urlnorm.Options{}); err == nil {
					push(t, it.depth, 0) // at the page's depth
				}
			}
			imageOf = ""
		}
	}
	return e
}

// isLoginPath tells the site's login pages by their path (the site's own
// table, not the crawler's heuristics).
func isLoginPath(p string) bool { return p == "/login" }

// relative returns l as written under the page's <base href>, if any.
func relative(l string, body []byte) string {
	i := bytes.Index(body, []byte(`<base href="`))
	if i < 0 {
		return l
	}
	rest := body[i+len(`<base href="`):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return l
	}
	base := string(rest[:j])
	if strings.HasPrefix(l, base) {
		return l[len(base):]
	}
	return l
}

// robotsFor evaluates host's robots.txt as served, following up to five
// redirects (RFC 9309).
func (s *Site) robotsFor(host string) *robots.Robots {
	uri := "/robots.txt"
	for hop := 0; hop <= 5; hop++ {
		r := s.Page(host, uri, 0)
		if r.Status >= 300 && r.Status < 400 {
			uri = r.Header.Get("Location")
			continue
		}
		return robots.ForStatus(r.Status, r.Body)
	}
	return robots.AllowAll()
}
