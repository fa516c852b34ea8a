package pipeline_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/pipeline/livesite"
)

// startCrawl starts an ordinary crawl of host's tree.
func (e *env) startCrawl(name, host string) *crawl.Store {
	e.t.Helper()
	c := crawl.New(name)
	c.Seeds = []crawl.Seed{{URL: e.site.URL(host, "/")}}
	c.Delay = crawl.Duration(5 * time.Millisecond)
	c.AllowPrivate = true
	hp, addr, _ := crawl.ParseResolve(e.site.Resolve(host))
	c.Resolve = map[string]string{hp: addr}
	if err := c.Validate(); err != nil {
		e.t.Fatal(err)
	}
	st := e.store(name)
	if err := st.Create(c); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// TestDomainRefreshByInterval: an exhausted domain of an ordinary crawl
// becomes due after the refresh interval; a run asks its frontier to
// refresh it (resuming the done crawl), the refresh revisits every known
// URL with conditional requests, unchanged pages are recorded as such and
// no body is stored again; priority scores are computed at query time.
func TestDomainRefreshByInterval(t *testing.T) {
	e := startEnv(t)
	host := "docs.test"
	e.site.SetMode(host, livesite.ETag)
	siteTree(e.site, host)
	st := e.startCrawl("docs", host)
	e.waitCrawl("docs", crawl.Done, 1)
	e.waitJobsDone(10 * time.Second)
	bodies := e.bodies("docs")
	before := len(e.site.Log())

	// Not due yet with a long interval.
	rep := e.run(pipeline.RunOptions{Mode: pipeline.ModeAcquire, RefreshInterval: time.Hour})
	if len(rep.Refresh) != 0 {
		t.Fatalf("refresh before the interval: %+v", rep.Refresh)
	}
	rep = e.run(pipeline.RunOptions{Mode: pipeline.ModeAcquire, RefreshInterval: time.Millisecond})
	if len(rep.Refresh) != 1 || rep.Refresh[0].Status != "requested" || rep.Refresh[0].Domain != host+":"+e.site.Port() {
		t.Fatalf("refresh: %+v", rep.Refresh)
	}
	e.waitCrawl("docs", crawl.Done, 2)
	e.waitJobsDone(10 * time.Second)
	for _, r := range e.site.Log()[before:] {
		if r.Path == "/robots.txt" || r.Path == "/sitemap.xml" { // read again before the round
			continue
		}
		if r.IfNoneMatch == "" || r.Status != 304 {
			t.Errorf("refresh request %s: If-None-Match %q status %d, want 304", r.Path, r.IfNoneMatch, r.Status)
		}
	}
	if n := len(e.site.Log()[before:]); n < 4 {
		t.Errorf("refresh made %d requests, want the 4 known URLs", n)
	}
	if got := e.bodies("docs"); len(got) != len(bodies) {
		t.Errorf("refresh stored bodies: %d -> %d", len(bodies), len(got))
	}
	d, err := st.LoadDomain(host + ":" + e.site.Port())
	if err != nil {
		t.Fatal(err)
	}
	if d.Round != 1 || d.PagesUnchanged != 4 || d.PagesNew != 4 || d.Status != crawl.DomainExhausted {
		t.Errorf("domain: round %d unchanged %d new %d status %s", d.Round, d.PagesUnchanged, d.PagesNew, d.Status)
	}
	// A second run right away: the domain was just crawled, nothing due.
	if rep := e.run(pipeline.RunOptions{Mode: pipeline.ModeAcquire, RefreshInterval: time.Hour}); len(rep.Refresh) != 0 {
		t.Errorf("refresh due again at once: %+v", rep.Refresh)
	}
	// farroctl domains --by priority: yield 0.5 (4 new of 8 responses),
	// nothing remaining, no errors, fresh: score 500.
	var out bytes.Buffer
	c := &ctl.Ctl{Root: e.spool.Root, Stdout: &out, Stderr: &out}
	if err := c.Domains(ctl.DomainsOptions{By: "priority", JSON: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"score":500`) || !strings.Contains(out.String(), `"yield_rate":0.5`) {
		t.Errorf("domains --by priority: %s", out.String())
	}
}

// snapshot describes every file and directory under root: path, mode,
// size, mtime and content hash.
func snapshot(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v %d %d", strings.TrimPrefix(p, root), fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestDryRunChangesNothing: with sources due, one acquisition pending and
// a domain due for refresh, --dry-run in every mode (through farroctl's
// logic) plans work and leaves the spool's tree exactly as it was.
func TestDryRunChangesNothing(t *testing.T) {
	e := startEnv(t)
	e.site.SetMode("docs.test", livesite.ETag)
	siteTree(e.site, "docs.test")
	e.startCrawl("docs", "docs.test")
	e.waitCrawl("docs", crawl.Done, 1)
	e.site.Set("x.test", "/", livesite.Page("x"))
	e.addSource("x1", "x.test", "/", nil)
	e.addSource("x2", "x.test", "/", nil)
	e.addSource("x3", "x.test", "/", nil)
	e.run(pipeline.RunOptions{Mode: pipeline.ModeCheck, Politeness: pipeline.Politeness{MaxSources: 1}})
	e.waitJobsDone(10 * time.Second)
	e.makeDue("x1")
	e.stop() // nothing may move while the trees are compared
	before := snapshot(t, e.spool.Root)
	var out bytes.Buffer
	c := &ctl.Ctl{Root: e.spool.Root, Stdout: &out, Stderr: &out}
	for _, m := range []pipeline.Mode{pipeline.ModeRun, pipeline.ModeCheck, pipeline.ModeAcquire} {
		if err := c.Pipeline(ctl.PipelineOptions{Mode: m, DryRun: true, MaxSources: 10, MaxPerDomain: 3, RefreshInterval: time.Millisecond}); err != nil {
			t.Fatalf("%s --dry-run: %v\n%s", m, err, out.String())
		}
	}
	if err := c.PipelineStatus(time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, e.spool.Root)
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("dry run changed the spool:\nbefore:\n%s\nafter:\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
	// The plan was printed: three checks, one acquisition, one refresh.
	for _, want := range []string{"sc-x1-", "sc-x2-0", "sc-x3-0", "x1 -> crawl src-x1: planned", "docs docs.test:" + e.site.Port() + ": planned"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, out.String())
		}
	}
}
