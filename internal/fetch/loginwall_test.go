package fetch

import (
	"testing"

	"github.com/farro-dev/farro/internal/crawl"
)

// TestLoginWallMarking: a password input inside a form marks a 2xx page
// answered for a URL that is not a login URL; a redirect to a login URL
// of the site marks a 3xx; nothing else is marked.
func TestLoginWallMarking(t *testing.T) {
	t.Parallel()
	form := `<html><body><FORM action="/s"><input name=u><INPUT TYPE="Password" name=p></FORM></body></html>`
	for _, c := range []struct {
		name, url, body, redirect string
		status                    int
		want                      string
	}{
		{"form on a content URL", "http://a.test/members", form, "", 200, crawl.LoginWallForm},
		{"form on the login page itself", "http://a.test/login", form, "", 200, ""},
		{"password input outside a form", "http://a.test/x", `<input type="password">`, "", 200, ""},
		{"form without a password", "http://a.test/x", `<form><input type="text"></form>`, "", 200, ""},
		{"search form after a closed login form", "http://a.test/x", `<form></form><input type="password">`, "", 200, ""},
		{"redirect to login", "http://a.test/private", "", "http://a.test/login?next=/private", 302, crawl.LoginWallRedirect},
		{"redirect elsewhere", "http://a.test/old", "", "http://a.test/new", 301, ""},
		{"form on a 404", "http://a.test/x", form, "", 404, ""},
	} {
		art := &crawl.Artifact{ContentType: "text/html", RedirectTo: c.redirect}
		markLoginWall(&crawl.FetchPrompt{URL: c.url}, art, &response{status: c.status, body: []byte(c.body)})
		if art.LoginWall != c.want {
			t.Errorf("%s: login_wall %q, want %q", c.name, art.LoginWall, c.want)
		}
	}
}
