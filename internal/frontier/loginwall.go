package frontier

import (
	"fmt"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// loginWall judges a fetched response toward its domain's login wall
// (internal/crawl/loginwall.go). A response the fetcher marked as a wall
// blocks the domain with reason login_required, for LoginWallCooldown,
// when the domain has answered no 2xx page yet (its first pages are walled:
// the whole site is behind the login), or when it is the block_threshold-th
// wall in a row (a site that walls a few private pages among public ones
// is not blocked for them). A 2xx page that is not a login page ends the
// streak; a login page fetched by its own URL neither counts nor ends it.
func (d *driver) loginWall(dm *dom, art *crawl.Artifact, now time.Time) {
	dd := dm.d
	if art.LoginWall == "" {
		if art.HTTPStatus >= 200 && art.HTTPStatus < 300 && !crawl.IsLoginURL(art.NormalizedURL) {
			dd.ConsecutiveLoginWalls = 0
		}
		return
	}
	dd.LoginWalls++
	dd.ConsecutiveLoginWalls++
	first := dd.PagesNew == 0 && dd.PagesUnchanged == 0
	if !first && dd.ConsecutiveLoginWalls < d.cfg.BlockThreshold {
		return
	}
	what := "a login form"
	if art.LoginWall == crawl.LoginWallRedirect {
		what = "a redirect to " + firstLine(art.RedirectTo, 200)
	}
	detail := fmt.Sprintf("login wall: %s answered %s", firstLine(art.NormalizedURL, 200), what)
	if !first {
		detail += fmt.Sprintf(" (%d login walls in a row)", dd.ConsecutiveLoginWalls)
	}
	d.block(dm, crawl.DomainBlocked, crawl.ReasonLoginRequired, detail, d.cfg.CooldownFor(crawl.DomainBlocked, crawl.ReasonLoginRequired), now)
}
