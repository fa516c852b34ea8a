package pipeline_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/pipeline/livesite"
	"github.com/farro-dev/farro/internal/source"
)

// siteTree puts a small tree on host: / -> /a, /b; /a -> /c.
func siteTree(site *livesite.Site, host string) {
	site.Set(host, "/", livesite.Page("home", "/a", "/b"))
	site.Set(host, "/a", livesite.Page("a", "/c"))
	site.Set(host, "/b", livesite.Page("b"))
	site.Set(host, "/c", livesite.Page("c"))
}

// TestPipelineDetectAndAcquire runs the pipeline three times against a
// site with each validator mode: a first check acquires the source (its
// crawl fetches the tree); an unchanged source is not acquired again
// (only its check request reaches the site); after the test edits the
// source page and one other page, the source is changed, its crawl starts
// a refresh round that revisits every known URL with conditional requests,
// and only the changed (and new) pages are stored again.
func TestPipelineDetectAndAcquire(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode livesite.Mode
	}{{"etag", livesite.ETag}, {"last-modified", livesite.LastModified}, {"hash-only", livesite.HashOnly}} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnv(t)
			host := "news.test"
			e.site.SetMode(host, tc.mode)
			siteTree(e.site, host)
			src := e.addSource("news", host, "/", nil)

			// Run 1: first check, acquisition.
			rep := e.run(pipeline.RunOptions{})
			if len(rep.Checks) != 1 || rep.Checks[0].Status != "submitted" {
				t.Fatalf("run 1 checks: %+v", rep.Checks)
			}
			e.waitJobsDone(20 * time.Second)
			s := e.source("news")
			if s.LastOutcome != source.First || s.Acquisitions != 1 || s.AcquirePending {
				t.Fatalf("after run 1: outcome %s acquisitions %d pending %v", s.LastOutcome, s.Acquisitions, s.AcquirePending)
			}
			e.waitCrawl(src.Crawl, crawl.Done, 1)
			e.waitJobsDone(10 * time.Second)
			for _, p := range []string{"/", "/a", "/b", "/c"} {
				if n := e.site.Count(host, p, 200); n < 1 {
					t.Errorf("run 1: %s fetched %d times", p, n)
				}
			}
			bodies1 := e.bodies(src.Crawl)
			requests1 := len(e.site.Log())

			// Run 2: unchanged; not acquired again.
			e.makeDue("news")
			e.run(pipeline.RunOptions{})
			e.waitFor("second check", 10*time.Second, func() bool { return e.source("news").Checks == 2 })
			e.waitJobsDone(10 * time.Second)
			s = e.source("news")
			if s.LastOutcome != source.Unchanged || s.Acquisitions != 1 || s.AcquirePending {
				t.Fatalf("after run 2: outcome %s acquisitions %d pending %v", s.LastOutcome, s.Acquisitions, s.AcquirePending)
			}
			if c := e.waitCrawl(src.Crawl, crawl.Done, 1); c.Run != 1 {
				t.Errorf("unchanged source's crawl resumed: run %d", c.Run)
			}
			if got := e.site.Log()[requests1:]; len(got) != 1 || got[0].Path != "/" {
				t.Errorf("run 2 made requests %+v, want only the check of /", got)
			} else {
				checkConditional(t, tc.mode, got[0], true)
			}

			// Run 3: the source page and /c change, /d is new.
			e.site.Set(host, "/", livesite.Page("home, edited", "/a", "/b", "/d"))
			e.site.Set(host, "/c", livesite.Page("c, edited"))
			e.site.Set(host, "/d", livesite.Page("d"))
			requests2 := len(e.site.Log())
			e.makeDue("news")
			e.run(pipeline.RunOptions{})
			// The handler acquires before its job commits.
			e.waitFor("third check and its acquisition", 10*time.Second, func() bool {
				s := e.source("news")
				return s.Checks == 3 && s.Acquisitions == 2
			})
			s = e.source("news")
			if s.LastOutcome != source.Changed || s.Acquisitions != 2 || s.LastChangedAt == nil {
				t.Fatalf("after run 3: outcome %s acquisitions %d", s.LastOutcome, s.Acquisitions)
			}
			e.waitCrawl(src.Crawl, crawl.Done, 2)
			e.waitJobsDone(10 * time.Second)

			// Every known URL was revisited once, conditionally (except in
			// hash-only mode), the new one fetched.
			round := e.site.Log()[requests2+1:] // after the check
			seen := map[string]int{}
			for _, r := range round {
				if r.Path == "/robots.txt" {
					continue
				}
				seen[r.Path]++
				switch r.Path {
				case "/a", "/b":
					checkConditional(t, tc.mode, r, true)
				case "/d":
					checkConditional(t, tc.mode, r, false)
				}
			}
			for _, p := range []string{"/", "/a", "/b", "/c", "/d"} {
				if seen[p] != 1 {
					t.Errorf("refresh round: %s requested %d times, want 1 (%v)", p, seen[p], seen)
				}
			}
			// Only the changed and new pages were stored: /, /c, /d.
			bodies2 := e.bodies(src.Crawl)
			if added := len(bodies2) - len(bodies1); added != 3 {
				t.Errorf("refresh stored %d new bodies, want 3 (before %v, after %v)", added, bodies1, bodies2)
			}
			d, err := e.store(src.Crawl).LoadDomain(s.Domain)
			if err != nil {
				t.Fatal(err)
			}
			if d.Round != 1 || d.PagesUnchanged != 2 || d.Status != crawl.DomainExhausted {
				t.Errorf("domain after refresh: round %d unchanged %d status %s", d.Round, d.PagesUnchanged, d.Status)
			}
			unchanged := map[string]bool{}
			for _, o := range e.outcomes(src.Crawl) {
				if o.Round == 1 && o.Unchanged {
					unchanged[strings.TrimPrefix(o.URL, e.site.URL(host, ""))] = true
				}
			}
			if len(unchanged) != 2 || !unchanged["/a"] || !unchanged["/b"] {
				t.Errorf("round 1 unchanged outcomes: %v, want /a and /b", unchanged)
			}
		})
	}
}

// checkConditional checks that request r carried the validators the mode
// offers (want), and that the server could answer 304.
func checkConditional(t *testing.T, m livesite.Mode, r livesite.Request, want bool) {
	t.Helper()
	switch {
	case m == livesite.ETag && want && (r.IfNoneMatch == "" || r.Status != 304):
		t.Errorf("%s: If-None-Match %q status %d, want a 304", r.Path, r.IfNoneMatch, r.Status)
	case m == livesite.LastModified && want && (r.IfModifiedSince == "" || r.Status != 304):
		t.Errorf("%s: If-Modified-Since %q status %d, want a 304", r.Path, r.IfModifiedSince, r.Status)
	case (m == livesite.HashOnly || !want) && (r.IfNoneMatch != "" || r.IfModifiedSince != ""):
		t.Errorf("%s: unexpected validators %q %q", r.Path, r.IfNoneMatch, r.IfModifiedSince)
	}
}

// TestPipelineFailureBackoff: a failing source backs off exponentially
// (base, then twice the base), with the jitter within its bound, and
// recovers (failures reset, acquired) once the site answers again.
func TestPipelineFailureBackoff(t *testing.T) {
	e := startEnv(t)
	host := "flaky.test"
	e.site.SetMode(host, livesite.ETag)
	e.site.Set(host, "/", livesite.Page("flaky"))
	e.site.Fail(host, "/", 503)
	base, jitter := time.Hour, 10*time.Minute
	e.addSource("flaky", host, "/", func(s *source.Source) {
		s.BackoffBase, s.BackoffMax = crawl.Duration(base), crawl.Duration(3*base)
		s.Every = crawl.Duration(24 * time.Hour)
		s.Jitter = crawl.Duration(jitter)
	})
	for i, want := range []time.Duration{base, 2 * base, 3 * base /* capped */} {
		if i > 0 {
			e.makeDue("flaky")
		}
		e.run(pipeline.RunOptions{})
		e.waitFor(fmt.Sprintf("check %d", i+1), 10*time.Second, func() bool { return e.source("flaky").Checks == i+1 })
		s := e.source("flaky")
		if s.LastOutcome != source.Failed || s.ConsecutiveFailures != i+1 || s.LastHTTPStatus != 503 || s.AcquirePending {
			t.Fatalf("check %d: outcome %s failures %d status %d", i+1, s.LastOutcome, s.ConsecutiveFailures, s.LastHTTPStatus)
		}
		wait := s.NextCheckAfter.Sub(*s.LastCheckedAt)
		if wait < want || wait >= want+jitter {
			t.Errorf("check %d: next check %s after, want [%s, %s)", i+1, wait, want, want+jitter)
		}
	}
	e.waitJobsDone(10 * time.Second)
	e.site.Fail(host, "/", 0)
	e.makeDue("flaky")
	e.run(pipeline.RunOptions{})
	e.waitFor("recovery", 10*time.Second, func() bool { return e.source("flaky").Checks == 4 })
	e.waitJobsDone(10 * time.Second)
	s := e.source("flaky")
	if s.LastOutcome != source.First || s.ConsecutiveFailures != 0 || s.LastError != "" {
		t.Fatalf("recovery: outcome %s failures %d error %q", s.LastOutcome, s.ConsecutiveFailures, s.LastError)
	}
	if wait := s.NextCheckAfter.Sub(*s.LastCheckedAt); wait < 24*time.Hour || wait >= 24*time.Hour+jitter {
		t.Errorf("after recovery: next check %s after, want the interval plus jitter", wait)
	}
	e.waitCrawl(s.Crawl, crawl.Done, 1)
	e.waitFor("acquired", 10*time.Second, func() bool { return e.source("flaky").Acquisitions == 1 })
}

// TestPipelineLimitsLeaveTheRest: --max-sources and --max-per-domain
// take the due sources domain-fairly and leave the rest due; the next
// runs take them in the documented order, and checks of one domain are
// spaced by --min-domain-interval at the site.
func TestPipelineLimitsLeaveTheRest(t *testing.T) {
	e := startEnv(t)
	for _, h := range []string{"a.test", "b.test", "c.test"} {
		e.site.SetMode(h, livesite.HashOnly)
	}
	add := func(name, host string) {
		e.site.Set(host, "/"+name, livesite.Page(name))
		e.addSource(name, host, "/"+name, nil)
	}
	for _, n := range []string{"a1", "a2", "a3", "a4", "a5"} {
		add(n, "a.test")
	}
	add("b1", "b.test")
	add("b2", "b.test")
	add("c1", "c.test")
	interval := 300 * time.Millisecond
	pol := pipeline.Politeness{MaxSources: 4, MaxPerDomain: 2, MinDomainInterval: interval}
	names := func(cs []pipeline.CheckEntry) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Source)
		}
		return strings.Join(out, ",")
	}
	left := func(ls []pipeline.LeftEntry) string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Source)
		}
		return strings.Join(out, ",")
	}
	for i, want := range []struct{ checks, left string }{
		{"a1,b1,c1,a2", "a3,b2,a4,a5"},
		{"a3,b2,a4", "a5"},
		{"a5", ""},
	} {
		rep := e.run(pipeline.RunOptions{Mode: pipeline.ModeCheck, Politeness: pol})
		if got := names(rep.Checks); got != want.checks {
			t.Errorf("run %d checks %s, want %s", i+1, got, want.checks)
		}
		if got := left(rep.Left); got != want.left {
			t.Errorf("run %d left %s, want %s", i+1, got, want.left)
		}
		e.waitJobsDone(10 * time.Second)
	}
	for _, n := range []string{"a1", "a2", "a3", "a4", "a5", "b1", "b2", "c1"} {
		if s := e.source(n); s.Checks != 1 || !s.AcquirePending || s.Acquisitions != 0 {
			t.Errorf("%s: checks %d pending %v acquisitions %d (check mode acquires nothing)", n, s.Checks, s.AcquirePending, s.Acquisitions)
		}
	}
	// Two checks of a.test per run, spaced by the interval.
	var prev time.Time
	for _, r := range e.site.Log() {
		if r.Host != "a.test" {
			continue
		}
		if r.Path == "/a2" || r.Path == "/a4" {
			// Server-side times: the first request's may lag its sending.
			if gap := r.At.Sub(prev); gap < interval-50*time.Millisecond {
				t.Errorf("%s checked %s after the previous check of a.test, want >= %s", r.Path, gap, interval)
			}
		}
		prev = r.At
	}
}
