package fetch

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/net/html"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/robots"
)

// The crawl's content-type filter and the page's robots directives
// (docs/CRAWL.md, "Filters and robots meta"):
//
//   - a 2xx response whose Content-Type is not in the prompt's
//     content_types is recorded (status, headers) but its body is not
//     read: the connection is closed after the headers;
//   - X-Robots-Tag headers and <meta name="robots"> (or
//     name="<product token>") say noindex, nofollow or none; nofollow
//     leaves the page's links out, noindex marks the artifact;
//   - links with rel="nofollow" are left out.
//
// ignore_robots_meta and ignore_nofollow in the prompt turn the last two
// off.

type acceptKey struct{}

// filterContext carries the prompt's content types to do().
func filterContext(ctx context.Context, p *crawl.FetchPrompt) context.Context {
	if len(p.ContentTypes) == 0 {
		return ctx
	}
	return context.WithValue(ctx, acceptKey{}, p.ContentTypes)
}

// typeRejected reports whether resp is a 2xx whose type the context's
// content types do not accept (its body is then not read).
func typeRejected(ctx context.Context, resp *http.Response) bool {
	accepted, _ := ctx.Value(acceptKey{}).([]string)
	if len(accepted) == 0 || resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return false
	}
	return !crawl.ContentTypeAccepted(accepted, resp.Header.Get("Content-Type"))
}

// rejectType completes art for a response of a rejected content type.
func rejectType(p *crawl.FetchPrompt, art *crawl.Artifact) {
	art.BodyBytes = 0
	art.ErrorCode = crawl.ErrCodeContentType
	art.Error = fmt.Sprintf("content type %q not in the crawl's content types (%s): body not downloaded",
		art.ContentType, strings.Join(p.ContentTypes, ","))
}

// pageLinks fills art's links and robots directives from a fetched
// response.
func pageLinks(p *crawl.FetchPrompt, art *crawl.Artifact, res *response) {
	token := robots.ProductToken(p.UserAgent)
	var noindex, nofollow bool
	var from []string
	if !p.IgnoreRobotsMeta {
		if ds := headerDirectives(res.robotsTag, token); len(ds) > 0 {
			from = append(from, "header: "+strings.Join(ds, ", "))
			ni, nf := applyDirectives(ds)
			noindex, nofollow = noindex || ni, nofollow || nf
		}
	}
	html2xx := res.status >= 200 && res.status < 300 && IsHTML(art.ContentType, res.body)
	if html2xx && !p.IgnoreRobotsMeta {
		if ds := metaDirectives(res.body, token); len(ds) > 0 {
			from = append(from, "meta: "+strings.Join(ds, ", "))
			ni, nf := applyDirectives(ds)
			noindex, nofollow = noindex || ni, nofollow || nf
		}
	}
	art.Noindex, art.Nofollow = noindex, nofollow
	art.RobotsDirectives = strings.Join(from, "; ")
	if html2xx && !nofollow && p.Requisite == "" { // a requisite's links are not followed (images.go)
		art.Links, art.NofollowLinks = extractLinks(p.URL, res.body, !p.IgnoreNofollow)
	}
}

// applyDirectives reads noindex and nofollow out of robots directives
// (none is both; index, follow and all change nothing; the most
// restrictive wins).
func applyDirectives(ds []string) (noindex, nofollow bool) {
	for _, d := range ds {
		switch d {
		case "noindex":
			noindex = true
		case "nofollow":
			nofollow = true
		case "none":
			noindex, nofollow = true, true
		}
	}
	return noindex, nofollow
}

// valued are the X-Robots-Tag directives that take a value after a
// colon: anything else before a colon names a user agent.
var valued = map[string]bool{"unavailable_after": true, "max-snippet": true, "max-image-preview": true, "max-video-preview": true}

// headerDirectives returns the lowercased directives of X-Robots-Tag
// header values that apply to a crawler with product token token: those
// of values with no user agent, and those after "token:" (until the
// next user agent named in the same value).
func headerDirectives(values []string, token string) []string {
	var out []string
	for _, v := range values {
		applies := true
		for _, part := range strings.Split(v, ",") {
			part = strings.ToLower(strings.TrimSpace(part))
			if name, rest, ok := strings.Cut(part, ":"); ok && !valued[strings.TrimSpace(name)] {
				name = strings.TrimSpace(name)
				applies = name == token || name == "*"
				part = strings.TrimSpace(rest)
			}
			if applies && part != "" && !strings.Contains(part, ":") {
				out = append(out, part)
			}
		}
	}
	return out
}

// metaDirectives returns the lowercased directives of the document's
// <meta name="robots"> and <meta name="TOKEN"> elements, read up to
// <body> (they belong in <head>).
func metaDirectives(body []byte, token string) []string {
	z := html.NewTokenizer(bytes.NewReader(body))
	var out []string
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return out
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		switch string(name) {
		case "body":
			return out
		case "meta":
		default:
			continue
		}
		if !hasAttr {
			continue
		}
		var metaName, content string
		for {
			k, v, more := z.TagAttr()
			switch string(k) {
			case "name":
				metaName = strings.ToLower(strings.TrimSpace(string(v)))
			case "content":
				content = string(v)
			}
			if !more {
				break
			}
		}
		if metaName != "robots" && (token == "" || metaName != token) {
			continue
		}
		for _, d := range strings.Split(content, ",") {
			if d = strings.ToLower(strings.TrimSpace(d)); d != "" {
				out = append(out, d)
			}
		}
	}
}
