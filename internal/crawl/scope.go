package crawl

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/farro-dev/farro/internal/urlnorm"
)

// Origin is scheme://host[:port] of a normalized URL (userinfo dropped).
func Origin(normalized string) (string, error) {
	u, err := url.Parse(normalized)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("no origin in %q", normalized)
	}
	return u.Scheme + "://" + u.Host, nil
}

// RequestURI is the path and query of a normalized URL, as robots.txt
// rules see it.
func RequestURI(normalized string) string {
	u, err := url.Parse(normalized)
	if err != nil {
		return "/"
	}
	return u.RequestURI()
}

// Scoper decides whether a normalized URL belongs to a crawl.
type Scoper struct {
	scope    Scope
	domains  map[string]bool // host scope: canonical domains of the seeds
	parents  map[string]bool // domain scope: registrable domains of the seeds
	prefixes []string        // prefix scope: the seeds themselves
}

// NewScoper builds the scope of c from its (normalized) seeds.
func NewScoper(c *Crawl) (*Scoper, error) {
	s := &Scoper{scope: c.Scope, domains: map[string]bool{}, parents: map[string]bool{}}
	for _, seed := range c.Seeds {
		d, p, err := DomainOf(seed.URL)
		if err != nil {
			return nil, fmt.Errorf("seed %s: %w", seed.URL, err)
		}
		s.domains[d] = true
		s.parents[p] = true
		s.prefixes = append(s.prefixes, seed.URL)
	}
	return s, nil
}

// InScope reports whether normalized URL u is in scope; when it is not,
// why says so.
func (s *Scoper) InScope(u string) (ok bool, why string) {
	switch s.scope {
	case ScopePrefix:
		for _, p := range s.prefixes {
			if strings.HasPrefix(u, p) {
				return true, ""
			}
		}
		return false, "does not start with a seed URL (scope prefix)"
	case ScopeDomain:
		_, p, err := DomainOf(u)
		if err != nil {
			return false, err.Error()
		}
		if s.parents[p] {
			return true, ""
		}
		return false, fmt.Sprintf("registrable domain %s is not a seed's (scope domain)", p)
	default:
		d, _, err := DomainOf(u)
		if err != nil {
			return false, err.Error()
		}
		if s.domains[d] {
			return true, ""
		}
		return false, fmt.Sprintf("host %s is not a seed's (scope host)", d)
	}
}

// Normalize normalizes raw with the crawl's rules.
func (c *Crawl) NormalizeURL(raw string) (string, error) {
	return urlnorm.Normalize(raw, c.Normalize.Options())
}
