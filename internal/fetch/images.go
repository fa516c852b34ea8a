package fetch

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/urlnorm"
)

// ExtractImages returns the images an HTML document references, its
// images_found: <img src>, the candidates of <img srcset>, and those
// of <source srcset> inside <picture>. Each distinct URL counts once
// (after resolution against the document's base, as links are, and
// normalization with urlnorm's safe rules); data: URLs, other schemes,
// empty and unparsable references are not counted. found is the number
// of distinct image URLs; urls are the first limit of them, in document
// order.
func ExtractImages(pageURL string, body []byte, limit int) (urls []string, found int) {
	r := extractRequisites(pageURL, body, limit, false, false)
	return r.Images, r.ImagesFound
}

// pageImages fills art's images (and the stylesheets and scripts the
// prompt asks for) from a 2xx HTML response; a requisite's own body is
// not read for requisites.
func pageImages(p *crawl.FetchPrompt, art *crawl.Artifact, res *response) {
	if p.Requisite != "" || res.status < 200 || res.status >= 300 || !IsHTML(art.ContentType, res.body) {
		return
	}
	css, scripts := false, false
	for _, k := range p.PageRequisites {
		css = css || k == crawl.RequisiteCSS
		scripts = scripts || k == crawl.RequisiteScripts
	}
	art.PageImages = extractRequisites(p.URL, res.body, crawl.MaxPageImages, css, scripts)
}

// extractRequisites reads one document's images (and, when asked, its
// stylesheets and scripts) in one pass of the tokenizer.
func extractRequisites(pageURL string, body []byte, maxImages int, css, scripts bool) crawl.PageImages {
	z := html.NewTokenizer(bytes.NewReader(body))
	var imgs, sheets, scrs []string
	base, baseSeen := "", false
	picture := 0 // <picture> elements open
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		name, hasAttr := z.TagName()
		tag := string(name)
		if tag == "picture" {
			switch tt {
			case html.StartTagToken:
				picture++
			case html.EndTagToken:
				picture = max(picture-1, 0)
			}
			continue
		}
		if (tt != html.StartTagToken && tt != html.SelfClosingTagToken) || !hasAttr {
			continue
		}
		switch tag {
		case "img", "source", "base", "link", "script":
		default:
			continue
		}
		attrs := map[string]string{}
		for {
			k, v, more := z.TagAttr()
			if _, dup := attrs[string(k)]; !dup { // the first of a repeated attribute wins
				attrs[string(k)] = string(v)
			}
			if !more {
				break
			}
		}
		switch tag {
		case "base":
			if h, ok := attrs["href"]; ok && !baseSeen {
				base, baseSeen = h, true
			}
		case "img":
			if s, ok := attrs["src"]; ok {
				imgs = append(imgs, s)
			}
			imgs = append(imgs, SrcsetURLs(attrs["srcset"])...)
		case "source":
			if picture > 0 {
				imgs = append(imgs, SrcsetURLs(attrs["srcset"])...)
			}
		case "link":
			if css && relHas(attrs["rel"], "stylesheet") {
				if h, ok := attrs["href"]; ok {
					sheets = append(sheets, h)
				}
			}
		case "script":
			if s, ok := attrs["src"]; ok && scripts {
				scrs = append(scrs, s)
			}
		}
	}
	docBase := pageURL
	if baseSeen {
		if b, err := urlnorm.Resolve(pageURL, base, urlnorm.Options{}); err == nil {
			docBase = b
		}
	}
	var out crawl.PageImages
	out.Images, out.ImagesFound = resolveDistinct(docBase, imgs, maxImages)
	out.ImagesTruncated = out.ImagesFound > len(out.Images)
	out.Stylesheets, _ = resolveDistinct(docBase, sheets, crawl.MaxPageRequisites)
	out.Scripts, _ = resolveDistinct(docBase, scrs, crawl.MaxPageRequisites)
	return out
}

// resolveDistinct resolves refs against base and returns the first limit
// distinct http(s) URLs and how many distinct ones there are in all.
func resolveDistinct(base string, refs []string, limit int) (urls []string, distinct int) {
	seen := map[string]bool{}
	for _, r := range refs {
		r = strings.TrimSpace(r)
		if r == "" || hasScheme(r, "data") {
			continue
		}
		u, err := urlnorm.Resolve(base, r, urlnorm.Options{})
		if err != nil || seen[u] {
			continue
		}
		seen[u] = true
		distinct++
		if len(urls) < limit {
			urls = append(urls, u)
		}
	}
	return urls, distinct
}

func hasScheme(ref, scheme string) bool {
	return len(ref) > len(scheme) && ref[len(scheme)] == ':' && strings.EqualFold(ref[:len(scheme)], scheme)
}

// SrcsetURLs returns the URLs of a srcset attribute's image candidates
// ("a.png 1x, b.png 2x", "s.jpg 480w, l.jpg 1080w"), without their
// descriptors, as the HTML standard's srcset parsing splits them: a URL
// runs to the next whitespace (commas at its end end the candidate), and
// its descriptors run to the next comma outside parentheses.
func SrcsetURLs(srcset string) []string {
	var out []string
	s := srcset
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
	for {
		for len(s) > 0 && (isSpace(s[0]) || s[0] == ',') {
			s = s[1:]
		}
		if s == "" {
			return out
		}
		i := 0
		for i < len(s) && !isSpace(s[i]) {
			i++
		}
		u := s[:i]
		s = s[i:]
		if strings.HasSuffix(u, ",") {
			u = strings.TrimRight(u, ",")
			if u != "" {
				out = append(out, u)
			}
			continue
		}
		out = append(out, u)
		// Skip the descriptors: up to a comma not inside parentheses.
		depth := 0
		for len(s) > 0 {
			c := s[0]
			s = s[1:]
			if c == '(' {
				depth++
			} else if c == ')' && depth > 0 {
				depth--
			} else if c == ',' && depth == 0 {
				break
			}
		}
	}
}
