package crawl

import (
	"net/url"
	"strings"
)

// Login walls (docs/CRAWL.md, "Login walls"): a domain that answers its
// pages with a login page instead of their content is blocked with reason
// login_required and rests LoginWallCooldown. The fetcher marks a
// response as a wall (Artifact.LoginWall) by two heuristics:
//
//   - LoginWallRedirect: a 3xx whose Location is a login URL (a path
//     segment is a login word, see loginWords) of the same registrable
//     domain as the URL asked for, when that URL is not itself a login URL;
//   - LoginWallForm: a 2xx HTML page holding a <form> with an
//     <input type="password">, when its own URL is not a login URL.
//
// A login page reached by its own URL (a site's "/login" linked from its
// pages) is a page like any other: only content answered by a login page
// is a wall. The frontier judges the domain (internal/frontier/loginwall.go).
const (
	LoginWallRedirect = "redirect"
	LoginWallForm     = "form"
)

// loginWords are the path segments that name a login page (compared
// lowercased, without a file extension: "/Login.aspx", "/users/sign_in",
// "/auth/realms/x" all match).
var loginWords = map[string]bool{
	"login": true, "log-in": true, "log_in": true, "logon": true,
	"signin": true, "sign-in": true, "sign_in": true,
	"auth": true, "authenticate": true, "sso": true, "oauth": true,
}

// IsLoginPath reports whether a URL path has a login word as a segment.
func IsLoginPath(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		seg = strings.ToLower(seg)
		if i := strings.LastIndexByte(seg, '.'); i > 0 {
			seg = seg[:i]
		}
		if loginWords[seg] {
			return true
		}
	}
	return false
}

// IsLoginURL reports whether rawURL's path is a login path (false for a
// URL that does not parse).
func IsLoginURL(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && IsLoginPath(u.EscapedPath())
}

// IsLoginRedirect reports whether a redirect from from to to (both
// absolute) sends a visitor to a login page: to is a login URL on from's
// registrable domain and from is not a login URL itself.
func IsLoginRedirect(from, to string) bool {
	if !IsLoginURL(to) || IsLoginURL(from) {
		return false
	}
	_, pf, err1 := DomainOf(from)
	_, pt, err2 := DomainOf(to)
	return err1 == nil && err2 == nil && pf != "" && pf == pt
}
