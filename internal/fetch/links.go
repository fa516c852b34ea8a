package fetch

import (
	"bytes"
	"io"
	"strings"

	"golang.org/x/net/html"

	"github.com/farro-dev/farro/internal/urlnorm"
)

// MaxLinks bounds the links kept from one page.
const MaxLinks = 10000

// ExtractLinks returns the absolute http(s) URLs an HTML document links
// to, in document order, without duplicates: a[href], area[href],
// link[href] with rel canonical or next, frame[src] and iframe[src].
// Relative references are resolved against the document's first
// <base href> (itself resolved against pageURL), else against pageURL,
// and normalized with urlnorm's safe rules; other schemes (mailto:,
// javascript:, data:) and unparsable references are dropped.
func ExtractLinks(pageURL string, body []byte) []string {
	links, _ := extractLinks(pageURL, body, false)
	return links
}

// extractLinks is ExtractLinks; with dropNofollow, the links whose rel
// has "nofollow" are left out and counted in dropped.
func extractLinks(pageURL string, body []byte, dropNofollow bool) (links []string, dropped int) {
	z := html.NewTokenizer(bytes.NewReader(body))
	var refs []string
	base := ""
	baseSeen := false
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err() == io.EOF {
				break
			}
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		if !hasAttr {
			continue
		}
		tag := string(name)
		var want string
		switch tag {
		case "a", "area", "link", "base":
			want = "href"
		case "frame", "iframe":
			want = "src"
		default:
			continue
		}
		var val, rel string
		found := false
		for {
			k, v, more := z.TagAttr()
			switch string(k) {
			case want:
				if !found {
					val, found = string(v), true
				}
			case "rel":
				rel = string(v)
			}
			if !more {
				break
			}
		}
		if !found {
			continue
		}
		switch tag {
		case "base":
			if !baseSeen {
				baseSeen = true
				base = val
			}
			continue
		case "link":
			if !relHas(rel, "canonical") && !relHas(rel, "next") {
				continue
			}
		}
		if dropNofollow && relHas(rel, "nofollow") {
			dropped++
			continue
		}
		refs = append(refs, val)
	}
	docBase := pageURL
	if baseSeen {
		if b, err := urlnorm.Resolve(pageURL, base, urlnorm.Options{}); err == nil {
			docBase = b
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range refs {
		u, err := urlnorm.Resolve(docBase, r, urlnorm.Options{})
		if err != nil || seen[u] {
			continue
		}
		seen[u] = true
		out = append(out, u)
		if len(out) >= MaxLinks {
			break
		}
	}
	return out, dropped
}

func relHas(rel, token string) bool {
	for _, f := range strings.Fields(rel) {
		if strings.EqualFold(f, token) {
			return true
		}
	}
	return false
}

// IsHTML reports whether a Content-Type (or, without one, the sniffed
// start of the body) is HTML.
func IsHTML(contentType string, body []byte) bool {
	ct := strings.ToLower(strings.TrimSpace(contentType))
	if ct == "" {
		head := strings.ToLower(string(body[:min(len(body), 512)]))
		head = strings.TrimLeft(head, " \t\r\n\ufeff")
		return strings.HasPrefix(head, "<!doctype html") || strings.HasPrefix(head, "<html") || strings.Contains(head, "<head") || strings.Contains(head, "<body")
	}
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = strings.TrimSpace(ct[:i])
	}
	return ct == "text/html" || ct == "application/xhtml+xml"
}
