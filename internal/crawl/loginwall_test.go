package crawl

import "testing"

// TestLoginWallHeuristics: login words as path segments (any case, with
// an extension), not inside other words; a redirect is a wall only to a
// login URL of the same registrable domain from a URL that is not one.
func TestLoginWallHeuristics(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{
		"/login": true, "/Login.aspx": true, "/users/sign_in": true, "/account/sign-in/": true, "/signin": true,
		"/auth/realms/x": true, "/sso": true, "/log-in": true, "/oauth/authorize": true,
		"/": false, "/blog/logins-explained": false, "/catalog": false, "/author/jane": false, "/docs/1": false,
	} {
		if got := IsLoginPath(p); got != want {
			t.Errorf("IsLoginPath(%q) = %v, want %v", p, got, want)
		}
	}
	for _, c := range []struct {
		from, to string
		want     bool
	}{
		{"http://a.site.test/", "http://a.site.test/login?next=/", true},
		{"http://a.site.test/docs", "http://accounts.site.test/signin", true}, // same registrable domain
		{"http://a.site.test/docs", "http://idp.other.test/login", false},     // another site's login
		{"http://a.site.test/login", "http://a.site.test/login?step=2", false},
		{"http://a.site.test/old", "http://a.site.test/new", false},
	} {
		if got := IsLoginRedirect(c.from, c.to); got != c.want {
			t.Errorf("IsLoginRedirect(%s, %s) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
