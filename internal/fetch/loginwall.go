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
	art.LoginWall = LoginWallOf(p.URL, res.status, art.RedirectTo, art.ContentType, res.body)
}

// LoginWallOf is the login wall an answer to a request for url is
// (crawl.LoginWallRedirect, crawl.LoginWallForm), "" when none: the one
// rule crawls and source checks judge answers by.
func LoginWallOf(url string, status int, redirectTo, contentType string, body []byte) string {
	switch {
	case status >= 300 && status < 400 && redirectTo != "":
		if crawl.IsLoginRedirect(url, redirectTo) {
			return crawl.LoginWallRedirect
		}
	case status >= 200 && status < 300 && IsHTML(contentType, body):
		if !crawl.IsLoginURL(url) && hasPasswordForm(body) {
			return crawl.LoginWallForm
		}
	}
	return ""
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
