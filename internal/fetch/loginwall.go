package fetch

import (
	"bytes"
	"strings"

	"golang.org/x/net/html"

	"github.com/farro-dev/farro/internal/crawl"
)

// markLoginWall sets art.LoginWall when the response is a login wall
// (internal/crawl/loginwall.go has the heuristics): a redirect to a login
// URL of the same registrable domain, or a 2xx HTML page with a password
// form answered for a URL that is not a login URL.
func markLoginWall(p *crawl.FetchPrompt, art *crawl.Artifact, res *response) {
	switch {
	case res.status >= 300 && res.status < 400 && art.RedirectTo != "":
		if crawl.IsLoginRedirect(p.URL, art.RedirectTo) {
			art.LoginWall = crawl.LoginWallRedirect
		}
	case res.status >= 200 && res.status < 300 && IsHTML(art.ContentType, res.body):
		if !crawl.IsLoginURL(p.URL) && hasPasswordForm(res.body) {
			art.LoginWall = crawl.LoginWallForm
		}
	}
}

// hasPasswordForm reports whether an HTML document has a <form> holding
// an <input type="password">.
func hasPasswordForm(body []byte) bool {
	z := html.NewTokenizer(bytes.NewReader(body))
	forms := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return false
		case html.EndTagToken:
			if name, _ := z.TagName(); string(name) == "form" && forms > 0 {
				forms--
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch string(name) {
			case "form":
				forms++
			case "input":
				if forms == 0 || !hasAttr {
					continue
				}
				for {
					k, v, more := z.TagAttr()
					if string(k) == "type" && strings.EqualFold(strings.TrimSpace(string(v)), "password") {
						return true
					}
					if !more {
						break
					}
				}
			}
		}
	}
}
