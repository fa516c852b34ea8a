package crawl

import (
	"fmt"
	"mime"
	"regexp"
	"strings"

	"github.com/farro-dev/farro/internal/urlnorm"
)

// Filters are a crawl's URL and content-type filters and its robots-meta
// switches (crawl.json; farroctl crawl start --accept-regex ...).
//
// A discovered URL (a link or a redirect target; seeds are exempt: the
// operator named them) is kept when it matches an accept pattern, or when
// there is none, and matches no reject pattern: a reject always wins.
// Regular expressions (RE2 syntax) match anywhere in the normalized URL;
// a prefix starting with '/' is a prefix of the URL's path and query, any
// other prefix is an absolute URL, normalized, and a prefix of the whole
// normalized URL.
//
// ContentTypes, when not empty, lists the media types whose 2xx bodies
// are downloaded ("text/html", "image/*"); a response of another type is
// recorded without its body. Empty (the default) accepts every type.
type Filters struct {
	AcceptRegex  []string `json:"accept_regex,omitempty"`
	RejectRegex  []string `json:"reject_regex,omitempty"`
	AcceptPrefix []string `json:"accept_prefix,omitempty"`
	RejectPrefix []string `json:"reject_prefix,omitempty"`
	ContentTypes []string `json:"content_types,omitempty"`
	// IgnoreNofollow follows links marked rel="nofollow".
	IgnoreNofollow bool `json:"ignore_nofollow,omitempty"`
	// IgnoreRobotsMeta ignores <meta name="robots"> and X-Robots-Tag
	// (noindex, nofollow, none).
	IgnoreRobotsMeta bool `json:"ignore_robots_meta,omitempty"`
}

// Limits on filters: a crawl.json is read by every frontier step's
// config reload, and RE2 compilation is linear in the pattern.
const (
	MaxFilterPatterns   = 256
	MaxFilterPatternLen = 4096
)

// Validate checks the patterns and content types and normalizes them in
// place (prefix URLs normalized with the crawl's rules, media types
// lowercased).
func (f *Filters) Validate(norm urlnorm.Options) error {
	if _, err := f.compile(norm); err != nil {
		return err
	}
	for i, p := range f.AcceptPrefix {
		f.AcceptPrefix[i], _ = normPrefix(p, norm)
	}
	for i, p := range f.RejectPrefix {
		f.RejectPrefix[i], _ = normPrefix(p, norm)
	}
	for i, t := range f.ContentTypes {
		n, err := normMediaRange(t)
		if err != nil {
			return err
		}
		f.ContentTypes[i] = n
	}
	return nil
}

// URLFilter is a compiled Filters' URL part.
type URLFilter struct {
	accept, reject             []*regexp.Regexp
	acceptSrc, rejectSrc       []string
	acceptPrefix, rejectPrefix []string
}

// NewURLFilter compiles f (nil when f has no URL pattern).
func NewURLFilter(f Filters, norm urlnorm.Options) (*URLFilter, error) {
	return f.compile(norm)
}

func (f *Filters) compile(norm urlnorm.Options) (*URLFilter, error) {
	n := len(f.AcceptRegex) + len(f.RejectRegex) + len(f.AcceptPrefix) + len(f.RejectPrefix)
	if n == 0 {
		return nil, nil
	}
	if n > MaxFilterPatterns {
		return nil, fmt.Errorf("%d URL filter patterns: at most %d", n, MaxFilterPatterns)
	}
	uf := &URLFilter{}
	for _, set := range []struct {
		flag string
		src  []string
		dst  *[]*regexp.Regexp
		keep *[]string
	}{{"accept-regex", f.AcceptRegex, &uf.accept, &uf.acceptSrc}, {"reject-regex", f.RejectRegex, &uf.reject, &uf.rejectSrc}} {
		for _, s := range set.src {
			if s == "" || len(s) > MaxFilterPatternLen {
				return nil, fmt.Errorf("--%s %.40q: must be 1 to %d bytes", set.flag, s, MaxFilterPatternLen)
			}
			re, err := regexp.Compile(s)
			if err != nil {
				return nil, fmt.Errorf("--%s %q: %v", set.flag, s, err)
			}
			*set.dst = append(*set.dst, re)
			*set.keep = append(*set.keep, s)
		}
	}
	for _, set := range []struct {
		flag string
		src  []string
		dst  *[]string
	}{{"accept-prefix", f.AcceptPrefix, &uf.acceptPrefix}, {"reject-prefix", f.RejectPrefix, &uf.rejectPrefix}} {
		for _, s := range set.src {
			p, err := normPrefix(s, norm)
			if err != nil {
				return nil, fmt.Errorf("--%s %q: %v", set.flag, s, err)
			}
			*set.dst = append(*set.dst, p)
		}
	}
	return uf, nil
}

// normPrefix checks a prefix: a path ("/docs/") or an absolute http(s)
// URL, which is normalized.
func normPrefix(s string, norm urlnorm.Options) (string, error) {
	switch {
	case s == "" || len(s) > MaxFilterPatternLen:
		return "", fmt.Errorf("must be 1 to %d bytes", MaxFilterPatternLen)
	case strings.ContainsAny(s, " \t\r\n"):
		return "", fmt.Errorf("must not contain white space")
	case strings.HasPrefix(s, "/"):
		return s, nil
	}
	n, err := urlnorm.Normalize(s, norm)
	if err != nil {
		return "", fmt.Errorf("neither a path starting with / nor an http(s) URL: %v", err)
	}
	// "http://host" becomes "http://host/": the host ends there, so
	// that it is not a prefix of "http://host.evil/" too.
	return n, nil
}

// Allowed reports whether normalized URL u passes the filter; when it
// does not, why names the pattern that decided. A nil filter allows all.
func (uf *URLFilter) Allowed(u string) (ok bool, why string) {
	if uf == nil {
		return true, ""
	}
	path := RequestURI(u)
	for _, p := range uf.rejectPrefix {
		if matchPrefix(u, path, p) {
			return false, fmt.Sprintf("matches --reject-prefix %s", p)
		}
	}
	for i, re := range uf.reject {
		if re.MatchString(u) {
			return false, fmt.Sprintf("matches --reject-regex %s", uf.rejectSrc[i])
		}
	}
	if len(uf.accept) == 0 && len(uf.acceptPrefix) == 0 {
		return true, ""
	}
	for _, p := range uf.acceptPrefix {
		if matchPrefix(u, path, p) {
			return true, ""
		}
	}
	for _, re := range uf.accept {
		if re.MatchString(u) {
			return true, ""
		}
	}
	return false, "matches no --accept-regex or --accept-prefix"
}

func matchPrefix(u, path, p string) bool {
	if strings.HasPrefix(p, "/") {
		return strings.HasPrefix(path, p)
	}
	return strings.HasPrefix(u, p)
}

// normMediaRange checks one --content-types entry: type/subtype, type/*
// or */*, lowercased, parameters refused.
func normMediaRange(s string) (string, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	typ, sub, ok := strings.Cut(t, "/")
	if !ok || typ == "" || sub == "" || strings.ContainsAny(t, "; \t,") || (typ == "*" && sub != "*") {
		return "", fmt.Errorf("--content-types %q: want TYPE/SUBTYPE, TYPE/* or */*", s)
	}
	if _, _, err := mime.ParseMediaType(strings.ReplaceAll(t, "*", "x")); err != nil {
		return "", fmt.Errorf("--content-types %q: %v", s, err)
	}
	return t, nil
}

// ContentTypeAccepted reports whether a response's Content-Type header
// is in accepted (media ranges as Validate leaves them). An empty list
// accepts everything, and so does a missing or unparsable header: the
// type is then unknown until the body is read, and it is sniffed as
// before.
func ContentTypeAccepted(accepted []string, contentType string) bool {
	if len(accepted) == 0 {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if strings.TrimSpace(contentType) == "" || err != nil {
		return true
	}
	typ, _, _ := strings.Cut(mt, "/")
	for _, a := range accepted {
		if a == "*/*" || a == mt || a == typ+"/*" {
			return true
		}
	}
	return false
}

// Error code of the content-type filter.
const (
	// ErrCodeContentType: a 2xx response of a type not in the crawl's
	// content types; its body was not downloaded.
	ErrCodeContentType = "content_type_rejected"
)

// PageDirectives is what a fetch found of the page's robots directives,
// in result.json and outcomes.jsonl.
type PageDirectives struct {
	// Noindex: the page asked not to be indexed (<meta name="robots"
	// content="noindex|none"> or X-Robots-Tag). It is fetched and
	// archived like any page, and marked so that indexers skip it.
	Noindex bool `json:"noindex,omitempty"`
	// Nofollow: the page asked that its links not be followed; none
	// were extracted.
	Nofollow bool `json:"nofollow,omitempty"`
	// RobotsDirectives: where the directives came from, e.g.
	// "meta: noindex, nofollow; header: none".
	RobotsDirectives string `json:"robots_directives,omitempty"`
	// NofollowLinks: links marked rel="nofollow" that were not followed.
	NofollowLinks int `json:"nofollow_links,omitempty"`
}

// FetchFilters is the fetcher's part of Filters, in the prompt.
type FetchFilters struct {
	ContentTypes     []string `json:"content_types,omitempty"`
	IgnoreNofollow   bool     `json:"ignore_nofollow,omitempty"`
	IgnoreRobotsMeta bool     `json:"ignore_robots_meta,omitempty"`
}

// FetchFilters returns the fetcher's part of f.
func (f Filters) FetchFilters() FetchFilters {
	return FetchFilters{ContentTypes: f.ContentTypes, IgnoreNofollow: f.IgnoreNofollow, IgnoreRobotsMeta: f.IgnoreRobotsMeta}
}
