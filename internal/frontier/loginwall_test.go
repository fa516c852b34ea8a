package frontier_test

import (
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
)

// TestLoginWall crawls the test site's login-wall hosts: wall.site.test
// (every page redirects to /login) and members.site.test (every page is a
// login form) end blocked with reason login_required and the login-wall
// cooldown, after one request each; portal.site.test, public with one
// page redirecting to its /login (a login form), is crawled whole and
// ends exhausted. What was requested is what Expected says.
func TestLoginWall(t *testing.T) {
	t.Parallel()
	site := testsite.Start(testsite.Options{})
	defer site.Close()
	e := startEnv(t, 2)
	defer e.stop()
	cfg := testCrawl(site, "walls")
	cfg.Seeds = []crawl.Seed{{URL: site.URL(testsite.HostWall, "/")}, {URL: site.URL(testsite.HostMembers, "/")}, {URL: site.URL(testsite.HostPortal, "/")}}
	cfg.Delay = crawl.Duration(20 * time.Millisecond)
	cfg.LoginWallCooldown = crawl.Duration(3 * time.Hour) // apart from every other cooldown
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(e.spool, cfg.Name)
	if err := st.Create(cfg); err != nil {
		t.Fatal(err)
	}
	port := ":" + itoa(site.Port)
	wall, members, portal := testsite.HostWall+port, testsite.HostMembers+port, testsite.HostPortal+port
	want := map[string]crawl.DomainStatus{wall: crawl.DomainBlocked, members: crawl.DomainBlocked, portal: crawl.DomainExhausted}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		done := 0
		for name, s := range want {
			if d, err := st.LoadDomain(name); err == nil && d.Status == s && len(d.InFlight) == 0 {
				done++
			}
		}
		if done == len(want) {
			break
		}
		if time.Now().After(deadline) {
			doms, _ := st.Domains()
			for _, d := range doms {
				t.Logf("%s: %s %s %s", d.Domain, d.Status, d.Reason, d.ReasonDetail)
			}
			t.Fatal("login walls not judged")
		}
	}
	for _, name := range []string{wall, members} {
		d, err := st.LoadDomain(name)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason != crawl.ReasonLoginRequired || d.NextCrawlAfter == nil || d.FirstBlockedAt == nil || !strings.Contains(d.ReasonDetail, "login wall") {
			t.Errorf("%s: %s %q (%s), next %v; want login_required with a cooldown", name, d.Status, d.Reason, d.ReasonDetail, d.NextCrawlAfter)
			continue
		}
		if got := d.NextCrawlAfter.Sub(*d.FirstBlockedAt); got < 3*time.Hour-time.Second || got > 3*time.Hour+time.Second {
			t.Errorf("%s: rests %s, want the login-wall cooldown 3h", name, got)
		}
		if d.LoginWalls != 1 || d.Pending() == 0 {
			t.Errorf("%s: %d login walls, %d pending; want 1 and its URLs kept", name, d.LoginWalls, d.Pending())
		}
	}
	p, err := st.LoadDomain(portal)
	if err != nil {
		t.Fatal(err)
	}
	if p.LoginWalls != 1 || p.ConsecutiveLoginWalls != 1 {
		t.Errorf("portal: %d login walls (%d in a row), want its /account counted once", p.LoginWalls, p.ConsecutiveLoginWalls)
	}
	exp := site.Expected(testsite.ExpectOptions{Seeds: []string{cfg.Seeds[0].URL, cfg.Seeds[1].URL, cfg.Seeds[2].URL},
		MaxDepth: cfg.MaxDepth, UserAgent: cfg.UserAgent, ObeyRobots: true, BlockThreshold: cfg.BlockThreshold})
	if !exp.LoginWalled[testsite.HostWall] || !exp.LoginWalled[testsite.HostMembers] || exp.LoginWalled[testsite.HostPortal] {
		t.Errorf("Expected's login-walled hosts: %v", exp.LoginWalled)
	}
	checkCrawl(t, site.Log(), exp, nil)
}
