package pipeline_test

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/pipeline/livesite"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/pkg/job"
)

// fastRun is a run with test politeness.
var fastRun = pipeline.RunOptions{Politeness: pipeline.Politeness{MaxSources: 10, MaxPerDomain: 10, MinDomainInterval: 20 * time.Millisecond}}

// registryEntry reads domain's registry entry (nil when there is none).
func (e *env) registryEntry(domain string) *crawl.RegistryEntry {
	e.t.Helper()
	r, err := crawl.OpenRegistry(e.spool).Load(domain)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// crawlSendsNothing starts a crawl of host's page after the registry
// blocked the domain, beside a page of a control host, and checks that
// once the crawl has fetched the control page (its frontier released
// work after meeting both domains) the blocked host saw no request from
// it, robots.txt included, and the crawl's domain took its state from the
// registry.
func (e *env) crawlSendsNothing(host, domain string, want crawl.DomainStatus, reason string) {
	e.t.Helper()
	before := e.site.Count(host, "", 0)
	control := "control-" + host
	e.site.Set(control, "/page", livesite.Page("control"))
	c := crawl.New("after")
	c.Seeds = []crawl.Seed{{URL: e.site.URL(host, "/page")}, {URL: e.site.URL(control, "/page")}}
	c.AllowPrivate, c.Delay = true, crawl.Duration(5*time.Millisecond)
	c.Resolve = map[string]string{}
	for _, h := range []string{host, control} {
		hp, addr, _ := crawl.ParseResolve(e.site.Resolve(h))
		c.Resolve[hp] = addr
	}
	if err := e.store("after").Create(c); err != nil {
		e.t.Fatal(err)
	}
	e.waitFor("the crawl to fetch the control page", 10*time.Second, func() bool { return e.site.Count(control, "/page", 200) > 0 })
	var d *crawl.Domain
	e.waitFor("the crawl's "+domain, 10*time.Second, func() bool {
		doms, err := e.store("after").Domains()
		for _, x := range doms {
			if err == nil && x.Domain == domain {
				d = x
			}
		}
		return d != nil
	})
	if d.Status != want || d.Reason != reason || d.RegistryHold != want || d.NextCrawlAfter == nil || !strings.Contains(d.ReasonDetail, "from the domain registry") {
		e.t.Errorf("the crawl's domain: %s %s (%s) hold %q next %v: %s", d.Domain, d.Status, d.Reason, d.RegistryHold, d.NextCrawlAfter, d.ReasonDetail)
	}
	if n := e.site.Count(host, "", 0); n != before {
		e.t.Errorf("the crawl of a domain the registry blocked sent %d requests: %v", n-before, e.site.Paths(host))
	}
}

// TestCheckDeferredByRegistry: a source whose domain the registry says is
// blocked (by a crawl, cooldown ahead) is not requested, robots.txt
// included; its check is deferred to the cooldown's end and says why;
// after the cooldown it is checked again.
func TestCheckDeferredByRegistry(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	defer e.stop()
	host := "deferred.test"
	e.site.SetMode(host, livesite.ETag)
	e.site.Set(host, "/page", livesite.Page("page"))
	src := e.addSource("def", host, "/page", func(s *source.Source) { s.Jitter = crawl.Duration(time.Minute) })
	e.site.Set(host, "/pending", livesite.Page("pending"))
	e.addSource("pend", host, "/pending", func(s *source.Source) { // changed before the block: acquisition pending
		t := time.Now().UTC()
		s.AcquirePending, s.AcquirePendingSince = true, &t
	})
	now := time.Now().UTC()
	until := now.Add(14 * 24 * time.Hour)
	block := func(until time.Time) {
		if _, err := crawl.OpenRegistry(e.spool).Update([]string{src.Domain}, func(_ string, r *crawl.RegistryEntry) *crawl.RegistryEntry {
			if r == nil {
				r = &crawl.RegistryEntry{Domain: src.Domain, Crawls: map[string]*crawl.RegistryCrawl{}}
			}
			r.Status, r.Reason, r.StatusCrawl, r.StatusAt, r.CooldownUntil = crawl.DomainBlocked, crawl.ReasonForbidden, "other", now, &until
			return r
		}); err != nil {
			t.Fatal(err)
		}
	}
	block(until)
	rep := e.run(fastRun)
	if len(rep.Checks) != 2 {
		t.Fatalf("checks planned: %+v", rep.Checks)
	}
	e.waitJobsDone(10 * time.Second) // the check jobs, submitted by the run
	results := map[string]pipeline.CheckResult{}
	for _, c := range rep.Checks {
		var r pipeline.CheckResult
		if err := crawl.ReadResult(e.spool.JobDir(job.Succeeded, "", c.JobID), &r); err != nil {
			t.Fatal(err)
		}
		results[c.Source] = r
	}
	if r := results["def"]; r.Outcome != "" || !strings.Contains(r.Skipped, "blocked (forbidden)") || r.HTTPStatus != 0 {
		t.Errorf("result of the deferred check: %+v", r)
	}
	if r := results["pend"]; r.Acquire == nil || !strings.Contains(r.Acquire.Deferred, "not requested") || r.Acquire.Action != "" {
		t.Errorf("result of the deferred check of a source pending acquisition: %+v", r.Acquire)
	}
	if s := e.source("pend"); !s.AcquirePending || e.store(s.Crawl).Exists() {
		t.Errorf("the pending acquisition was made: %+v", s)
	}
	if p := e.site.Paths(host); len(p) != 0 {
		t.Errorf("requests to a blocked domain: %v", p)
	}
	s := e.source("def")
	if !strings.Contains(s.Deferred, "blocked (forbidden)") || !strings.Contains(s.Deferred, "crawl other") || !strings.Contains(s.Deferred, "not requested") {
		t.Errorf("deferred: %q", s.Deferred)
	}
	if s.NextCheckAfter == nil || s.NextCheckAfter.Before(until) || s.NextCheckAfter.After(until.Add(time.Minute)) {
		t.Errorf("next check %v, cooldown until %v", s.NextCheckAfter, until)
	}
	if s.Checks != 0 || s.LastOutcome != "" || s.ConsecutiveFailures != 0 || s.AcquirePending {
		t.Errorf("a deferred check counted as one: %+v", s)
	}
	if r := e.registryEntry(src.Domain); r.Status != crawl.DomainBlocked || r.StatusCrawl != "other" || r.Checks == nil ||
		r.Checks.Sources["def"] == nil || r.Checks.Sources["def"].Result != crawl.CheckResultDeferred || r.Checks.Requests != 0 {
		t.Errorf("registry after the deferral: %+v checks %+v", r, r.Checks)
	}
	// The cooldown over, the check is made, and clears the deferral.
	block(time.Now().UTC().Add(-time.Second))
	e.makeDue("def")
	check := fastRun
	check.Mode = pipeline.ModeCheck // no acquisition: its crawl would write the registry too
	e.run(check)
	e.waitFor("the check after the cooldown", 10*time.Second, func() bool { return e.source("def").Checks == 1 })
	e.waitJobsDone(10 * time.Second)
	if s := e.source("def"); s.Deferred != "" || s.LastOutcome != source.First {
		t.Errorf("after the cooldown: deferred %q, outcome %s", s.Deferred, s.LastOutcome)
	}
	if r := e.registryEntry(src.Domain); r.Status != crawl.DomainPending || r.Reason != crawl.ReasonCooldownOver || r.StatusSource != "def" {
		t.Errorf("registry after a good answer past the cooldown: %s (%s) by %s", r.Status, r.Reason, r.StatusBy())
	}
}

// TestCheckLoginWallBlocksDomain: a check answered by a login form
// fails, blocks the domain in the registry (login_required, the crawl's
// 30 days), and a crawl of the domain that follows sends nothing.
func TestCheckLoginWallBlocksDomain(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	defer e.stop()
	host := "walled.test"
	e.site.SetMode(host, livesite.ETag)
	e.site.Set(host, "/page", `<html><body><form action="/session" method="post"><input name="user"><input type="password" name="pw"></form></body></html>`)
	src := e.addSource("wall", host, "/page", nil)
	e.run(fastRun)
	e.waitFor("the check", 10*time.Second, func() bool { return e.source("wall").LastCheckedAt != nil })
	e.waitJobsDone(10 * time.Second)
	s := e.source("wall")
	if s.LastOutcome != source.Failed || !strings.Contains(s.LastError, "login wall") || s.AcquirePending || s.Acquisitions != 0 {
		t.Errorf("check of a login wall: outcome %s, error %q, acquire pending %v", s.LastOutcome, s.LastError, s.AcquirePending)
	}
	r := e.registryEntry(src.Domain)
	if r == nil || r.Status != crawl.DomainBlocked || r.Reason != crawl.ReasonLoginRequired || r.StatusSource != "wall" || r.CooldownUntil == nil ||
		r.CooldownUntil.Before(time.Now().Add(29*24*time.Hour)) {
		t.Fatalf("registry after a login wall: %+v", r)
	}
	e.crawlSendsNothing(host, src.Domain, crawl.DomainBlocked, crawl.ReasonLoginRequired)
}

// TestCheck403sBlockDomain: block_threshold (5) checks answered 403 in a
// row block the domain (forbidden, 14 days); the next check makes no
// request, nor does a crawl of the domain.
func TestCheck403sBlockDomain(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	defer e.stop()
	host := "forbidden.test"
	e.site.SetMode(host, livesite.ETag)
	e.site.Set(host, "/page", livesite.Page("page"))
	e.site.Fail(host, "/page", 403)
	src := e.addSource("f", host, "/page", nil)
	for i := 1; i <= 5; i++ {
		if i > 1 {
			e.makeDue("f")
		}
		e.run(fastRun)
		e.waitFor("check", 10*time.Second, func() bool { return e.source("f").ConsecutiveFailures == i })
		e.waitJobsDone(10 * time.Second)
		r := e.registryEntry(src.Domain)
		if i < 5 && (r == nil || r.Status != crawl.DomainPending || r.Checks.ConsecutiveErrors != i) {
			t.Fatalf("after %d 403s: %+v", i, r)
		}
	}
	r := e.registryEntry(src.Domain)
	if r.Status != crawl.DomainBlocked || r.Reason != crawl.ReasonForbidden || r.CooldownUntil == nil || r.CooldownUntil.Before(time.Now().Add(13*24*time.Hour)) {
		t.Fatalf("after five 403s: %+v", r)
	}
	if n := e.site.Count(host, "/page", 403); n != 5 {
		t.Fatalf("403s served: %d", n)
	}
	e.makeDue("f")
	e.run(fastRun)
	e.waitJobsDone(10 * time.Second)
	if n := e.site.Count(host, "/page", 0); n != 5 {
		t.Errorf("requests after the block: %d, want the 5 before it", n)
	}
	if s := e.source("f"); !strings.Contains(s.Deferred, "blocked (forbidden)") || !strings.Contains(s.Deferred, "the check of source f") {
		t.Errorf("deferred: %q", s.Deferred)
	}
	e.crawlSendsNothing(host, src.Domain, crawl.DomainBlocked, crawl.ReasonForbidden)
}

// TestAcquireDeferredByRegistry: an acquisition waits while its source's
// domain is blocked in the registry (acquire_pending kept, no crawl made).
func TestAcquireDeferredByRegistry(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	defer e.stop()
	host := "acq.test"
	e.site.Set(host, "/page", livesite.Page("page"))
	src := e.addSource("acq", host, "/page", func(s *source.Source) {
		now := time.Now().UTC()
		s.AcquirePending, s.AcquirePendingSince = true, &now
		next := now.Add(time.Hour)
		s.NextCheckAfter = &next
	})
	until := time.Now().UTC().Add(time.Hour)
	if _, err := crawl.OpenRegistry(e.spool).Update([]string{src.Domain}, func(_ string, _ *crawl.RegistryEntry) *crawl.RegistryEntry {
		return &crawl.RegistryEntry{Domain: src.Domain, Status: crawl.DomainUnreachable, Reason: crawl.ReasonTimeout, StatusCrawl: "other",
			StatusAt: time.Now().UTC(), CooldownUntil: &until, Crawls: map[string]*crawl.RegistryCrawl{}}
	}); err != nil {
		t.Fatal(err)
	}
	rep := e.run(pipeline.RunOptions{Mode: pipeline.ModeAcquire})
	if len(rep.Acquire) != 1 || rep.Acquire[0].Status != "deferred" || rep.Acquire[0].Result == nil ||
		!strings.Contains(rep.Acquire[0].Result.Deferred, "unreachable (timeout)") {
		t.Fatalf("acquisition: %+v", rep.Acquire)
	}
	if s := e.source("acq"); !s.AcquirePending || s.Acquisitions != 0 {
		t.Errorf("a deferred acquisition cleared the source's pending state: %+v", s)
	}
	if e.store(src.Crawl).Exists() {
		t.Error("a deferred acquisition made its crawl")
	}
	if p := e.site.Paths(host); len(p) != 0 {
		t.Errorf("requests: %v", p)
	}
}

// TestCheckHostileRegistryFile: a FIFO as the domain's registry file
// neither blocks the check nor defers it: the file is moved to corrupt/
// and the check's outcome written in a new entry.
func TestCheckHostileRegistryFile(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	defer e.stop()
	host := "fifo-reg.test"
	e.site.Set(host, "/page", livesite.Page("page"))
	src := e.addSource("fr", host, "/page", nil)
	reg := crawl.OpenRegistry(e.spool)
	if err := os.MkdirAll(reg.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(reg.Path(src.Domain), 0o644); err != nil {
		t.Fatal(err)
	}
	e.run(fastRun)
	e.waitFor("the check", 10*time.Second, func() bool { return e.source("fr").Checks == 1 })
	e.waitJobsDone(10 * time.Second)
	if s := e.source("fr"); s.LastOutcome != source.First || s.Deferred != "" {
		t.Errorf("check beside a hostile registry file: %+v", s)
	}
	fi, err := os.Lstat(reg.Path(src.Domain))
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("registry file after the check: %v %v", fi, err)
	}
	if r := e.registryEntry(src.Domain); r.Checks == nil || r.Checks.Sources["fr"] == nil || r.Checks.Sources["fr"].Result != crawl.CheckResultOK {
		t.Errorf("entry: %+v", r)
	}
}

// TestRefreshDeferredByRegistry: an exhausted domain due for a refresh
// is not refreshed while the registry says it is blocked (a source
// check's 403s, cooldown ahead): the run reports it deferred, saying why,
// and the site sees no request; a refresh asked directly of the crawl
// leaves it out too.
func TestRefreshDeferredByRegistry(t *testing.T) {
	t.Parallel()
	e := startEnv(t)
	defer e.stop()
	host := "refresh-blocked.test"
	e.site.SetMode(host, livesite.ETag)
	siteTree(e.site, host)
	st := e.startCrawl("rb", host)
	e.waitCrawl("rb", crawl.Done, 1)
	e.waitJobsDone(10 * time.Second)
	domain := host + ":" + e.site.Port()
	until := time.Now().UTC().Add(time.Hour)
	if _, err := crawl.OpenRegistry(e.spool).Update([]string{domain}, func(_ string, r *crawl.RegistryEntry) *crawl.RegistryEntry {
		r.Status, r.Reason, r.StatusCrawl, r.StatusSource, r.StatusAt, r.CooldownUntil = crawl.DomainBlocked, crawl.ReasonForbidden, "", "src1", time.Now().UTC(), &until
		return r
	}); err != nil {
		t.Fatal(err)
	}
	before := len(e.site.Log())
	rep := e.run(pipeline.RunOptions{Mode: pipeline.ModeAcquire, RefreshInterval: time.Millisecond})
	if len(rep.Refresh) != 1 || rep.Refresh[0].Status != "deferred" || !strings.Contains(rep.Refresh[0].Deferred, "the check of source src1") {
		t.Fatalf("refresh: %+v", rep.Refresh)
	}
	r, err := pipeline.RequestRefresh(st, nil, time.Now(), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Domains) != 0 || r.Deferred[domain] == "" || r.Resumed {
		t.Errorf("refresh asked of the crawl: domains %v, deferred %v, resumed %v", r.Domains, r.Deferred, r.Resumed)
	}
	if c, err := st.Load(); err != nil || c.State != crawl.Done || c.Run != 1 {
		t.Errorf("crawl after a deferred refresh: %+v %v", c, err)
	}
	reqs, err := os.ReadDir(st.Path(crawl.RequestsDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	for _, q := range reqs {
		if !strings.HasPrefix(q.Name(), ".") {
			t.Errorf("request written for a deferred domain: %s", q.Name())
		}
	}
	e.waitJobsDone(10 * time.Second)
	if n := len(e.site.Log()) - before; n != 0 {
		t.Errorf("%d requests to a blocked domain", n)
	}
}
