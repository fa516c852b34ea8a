package frontier_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/frontier"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/job"
)

// TestRegistryAcrossCrawls: a domain is one entity for the spool. Crawl
// one finds wall.site.test behind a login wall (blocked) and crawls
// portal.site.test whole (exhausted); both go to the registry. Crawl two
// names both and a new site: the wall starts blocked with crawl one's
// cooldown and the portal exhausted (held), neither gets a request; the
// new site is crawled. A reset of the portal's registry entry frees it
// in crawl two, which then crawls it.
func TestRegistryAcrossCrawls(t *testing.T) {
	t.Parallel()
	site := testsite.Start(testsite.Options{})
	defer site.Close()
	e := startEnv(t, 2)
	defer e.stop()
	port := ":" + itoa(site.Port)
	wall, portal, members := testsite.HostWall+port, testsite.HostPortal+port, testsite.HostMembers+port
	mk := func(name string, hosts ...string) *crawl.Store {
		cfg := testCrawl(site, name)
		cfg.Scope = crawl.ScopeHost
		cfg.Delay = crawl.Duration(20 * time.Millisecond)
		cfg.LoginWallCooldown = crawl.Duration(3 * time.Hour)
		cfg.Seeds = nil
		for _, h := range hosts {
			cfg.Seeds = append(cfg.Seeds, crawl.Seed{URL: site.URL(h, "/")})
		}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		st, _ := crawl.Open(e.spool, name)
		if err := st.Create(cfg); err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitDomains := func(st *crawl.Store, want map[string]crawl.DomainStatus) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			done := 0
			for name, s := range want {
				if d, err := st.LoadDomain(name); err == nil && d.Status == s && len(d.InFlight) == 0 {
					done++
				}
			}
			if done == len(want) {
				return
			}
			if time.Now().After(deadline) {
				doms, _ := st.Domains()
				for _, d := range doms {
					t.Logf("%s: %s %s %s", d.Domain, d.Status, d.Reason, d.ReasonDetail)
				}
				t.Fatalf("crawl %s: domains not %v", st.Name, want)
			}
		}
	}
	one := mk("one", testsite.HostWall, testsite.HostPortal)
	waitDomains(one, map[string]crawl.DomainStatus{wall: crawl.DomainBlocked, portal: crawl.DomainExhausted})
	reg := crawl.OpenRegistry(e.spool)
	var wallUntil time.Time
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		w, err1 := reg.Load(wall)
		p, err2 := reg.Load(portal)
		if err1 == nil && err2 == nil && w.Status == crawl.DomainBlocked && w.Reason == crawl.ReasonLoginRequired && w.CooldownUntil != nil &&
			p.Status == crawl.DomainExhausted && p.PagesCrawled > 0 && w.StatusCrawl == "one" {
			wallUntil = *w.CooldownUntil
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry after crawl one: %+v %v / %+v %v", w, err1, p, err2)
		}
	}
	if d := time.Until(wallUntil); d < 2*time.Hour || d > 3*time.Hour {
		t.Errorf("the wall's registry cooldown ends in %s, want crawl one's 3h", d)
	}

	mark := time.Now()
	two := mk("two", testsite.HostWall, testsite.HostPortal, testsite.HostMembers)
	waitDomains(two, map[string]crawl.DomainStatus{wall: crawl.DomainBlocked, portal: crawl.DomainExhausted, members: crawl.DomainBlocked})
	w2, err := two.LoadDomain(wall)
	if err != nil {
		t.Fatal(err)
	}
	if w2.RegistryHold != crawl.DomainBlocked || w2.Reason != crawl.ReasonLoginRequired || w2.NextCrawlAfter == nil || !w2.NextCrawlAfter.Equal(wallUntil) || w2.Pending() == 0 {
		t.Errorf("crawl two's wall: %+v; want blocked from the registry until %s, its seed queued", w2, wallUntil)
	}
	p2, err := two.LoadDomain(portal)
	if err != nil {
		t.Fatal(err)
	}
	if !p2.Held() || p2.Reason != crawl.ReasonRegistryExhausted || p2.Pending() != 1 {
		t.Errorf("crawl two's portal: %s %s (%d pending); want held exhausted with its seed queued", p2.Status, p2.Reason, p2.Pending())
	}
	requests := func(host string, since time.Time) int {
		n := 0
		for _, r := range site.Log() {
			if r.Host == host && !r.Start.Before(since) {
				n++
			}
		}
		return n
	}
	if n := requests(testsite.HostMembers, mark); n == 0 {
		t.Error("crawl two's new site got no request")
	}
	// A moment more: the held domains still get nothing.
	time.Sleep(300 * time.Millisecond)
	if n, m := requests(testsite.HostWall, mark), requests(testsite.HostPortal, mark); n != 0 || m != 0 {
		t.Errorf("crawl two sent %d requests to the wall and %d to the portal; want none", n, m)
	}
	if w, _ := reg.Load(wall); w == nil || w.StatusCrawl != "one" || w.Crawls["two"] == nil {
		t.Errorf("wall's registry entry after crawl two: %+v", w)
	}
	if m, _ := reg.Load(members); m == nil || m.Status != crawl.DomainBlocked || m.StatusCrawl != "two" {
		t.Errorf("members' registry entry: %+v", m)
	}

	// A refresh asked of the held portal is dropped: no request.
	before := time.Now().UTC()
	req, err := two.PutRequest(crawl.Request{Op: crawl.OpRefresh, Domain: portal, Actor: "test", RequestedAt: before, Before: &before})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(req); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the refresh request of a held domain was never applied")
		}
	}
	if p, _ := two.LoadDomain(portal); !p.Held() {
		t.Errorf("crawl two's portal after a refresh request: %s %s", p.Status, p.Reason)
	}
	if n := requests(testsite.HostPortal, mark); n != 0 {
		t.Errorf("a refresh request sent %d requests to the held portal", n)
	}

	// A reset of the registry's entry frees the portal in crawl two.
	reset := time.Now()
	if _, err := reg.Update([]string{portal}, func(_ string, e *crawl.RegistryEntry) *crawl.RegistryEntry {
		e.Reset("test", time.Now().UTC())
		return e
	}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); requests(testsite.HostPortal, reset) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the portal, reset in the registry, was not crawled by crawl two")
		}
	}

	// A hostile registry file is moved away, and the crawl goes on.
	if err := os.WriteFile(filepath.Join(reg.Dir, crawl.DomainFile("b.site.test"+port)), []byte("\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	three := mk("three", testsite.HostB)
	waitDomains(three, map[string]crawl.DomainStatus{testsite.HostB + port: crawl.DomainExhausted})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, err := reg.Load(testsite.HostB + port)
		if err == nil && b.Crawls["three"] != nil && b.PagesCrawled > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's registry entry, rewritten after the garbage: %+v %v", b, err)
		}
	}
	if q, _ := os.ReadDir(e.spool.Path("corrupt")); len(q) == 0 {
		t.Error("the garbage registry file is not in corrupt/")
	}
}

// TestRegistryWriteBackAfterCrash: a status change whose write-back to
// the registry a crash lost (the crawl's domain file says blocked, the
// registry's record of the crawl does not) is written back once the
// frontier drives the crawl again; a built registry is not rebuilt.
func TestRegistryWriteBackAfterCrash(t *testing.T) {
	t.Parallel()
	site := testsite.Start(testsite.Options{})
	defer site.Close()
	dir := t.TempDir()
	spool, err := job.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testCrawl(site, "lost")
	cfg.Seeds = []crawl.Seed{{URL: site.URL(testsite.HostB, "/")}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(spool, cfg.Name)
	if err := st.Create(cfg); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	until := now.Add(14 * 24 * time.Hour)
	x := crawl.NewDomain("x.example", "x.example", now)
	x.Status, x.Reason, x.NextCrawlAfter = crawl.DomainBlocked, crawl.ReasonForbidden, &until
	if err := st.WriteDomain(x, true); err != nil {
		t.Fatal(err)
	}
	reg := crawl.OpenRegistry(spool)
	// The registry knows the crawl's domain as it was before the block.
	if _, err := reg.Update([]string{"x.example"}, func(_ string, e *crawl.RegistryEntry) *crawl.RegistryEntry {
		old := crawl.NewDomain("x.example", "x.example", now)
		old.Status = crawl.DomainActive
		out, _ := crawl.Observe(e, cfg, old, true, now)
		return out
	}); err != nil {
		t.Fatal(err)
	}
	if err := reg.MarkBuilt(now); err != nil {
		t.Fatal(err)
	}
	e := startEnvAt(t, dir, 2)
	defer e.stop()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := reg.Load("x.example")
		if err == nil && got.Status == crawl.DomainBlocked && got.CooldownUntil != nil && got.CooldownUntil.Equal(until) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lost write-back was not made again: %+v %v", got, err)
		}
	}
}

// TestRegistryLockHeldNeverStopsTheCrawl: a writer lock of the registry
// that another process keeps delays the write-back, not the crawl; the
// entries are written once it is let go.
func TestRegistryLockHeldNeverStopsTheCrawl(t *testing.T) {
	t.Parallel()
	site := testsite.Start(testsite.Options{})
	defer site.Close()
	dir := t.TempDir()
	spool, err := job.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := crawl.OpenRegistry(spool)
	if err := reg.MarkBuilt(time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	l, err := reg.Lock(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e := startEnvAt(t, dir, 2)
	defer e.stop()
	cfg := testCrawl(site, "locked")
	cfg.Seeds = []crawl.Seed{{URL: site.URL(testsite.HostB, "/")}}
	cfg.Scope = crawl.ScopeHost
	cfg.Delay = crawl.Duration(20 * time.Millisecond)
	cfg.MaxDepth = 1
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(spool, cfg.Name)
	if err := st.Create(cfg); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 20*time.Second)
	// Longer than a step waits for the lock: the stopping driver's last
	// write fails too.
	time.Sleep(3 * frontier.RegistryLockWait)
	b := testsite.HostB + ":" + itoa(site.Port)
	if _, err := reg.Load(b); err == nil {
		t.Error("an entry was written while the lock was held")
	}
	l.Unlock()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := reg.Load(b)
		if err == nil && got.Crawls["locked"] != nil && got.PagesCrawled > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no entry after the lock was let go: %+v %v", got, err)
		}
	}
}
