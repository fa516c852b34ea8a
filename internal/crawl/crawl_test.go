package crawl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

func TestJobIDs(t *testing.T) {
	for _, name := range []string{"a", "my-crawl", "x-1-2", strings.Repeat("n", 64)} {
		id := FetchJobID(name, "http://example.com/")
		if err := job.ValidateID(id); err != nil {
			t.Errorf("FetchJobID(%q) = %q: %v", name, id, err)
		}
		if k, n, ok := ParseJobID(id); !ok || k != KindFetch || n != name {
			t.Errorf("ParseJobID(%q) = %q, %q, %v", id, k, n, ok)
		}
		rid := RobotsJobID(name, "http://example.com", 12)
		if err := job.ValidateID(rid); err != nil {
			t.Errorf("RobotsJobID = %q: %v", rid, err)
		}
		if k, n, ok := ParseJobID(rid); !ok || k != KindRobots || n != name {
			t.Errorf("ParseJobID(%q) = %q, %q, %v", rid, k, n, ok)
		}
	}
	if FetchJobID("a", "http://x/1") == FetchJobID("a", "http://x/2") || FetchJobID("a", "http://x/1") != FetchJobID("a", "http://x/1") {
		t.Error("fetch job IDs are not a function of the URL")
	}
	for _, id := range []string{"20261121T114512.123456Z-9f3a1c", "c-", "c-a-xyz", "r-a-0123456789abcdef-x", "c-" + strings.Repeat("0", 24), "victim"} {
		if _, _, ok := ParseJobID(id); ok {
			t.Errorf("ParseJobID(%q) accepted a non-crawl ID", id)
		}
	}
}

func TestValidate(t *testing.T) {
	c := New("ok")
	c.Seeds = []Seed{{URL: "HTTP://Example.COM:80/a/./b"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Seeds[0].URL != "http://example.com/a/b" {
		t.Errorf("seed not normalized: %q", c.Seeds[0].URL)
	}
	bad := []func(c *Crawl){
		func(c *Crawl) { c.Name = "bad name" },
		func(c *Crawl) { c.Seeds = nil },
		func(c *Crawl) { c.Seeds = []Seed{{URL: "mailto:x@y"}} },
		func(c *Crawl) { c.Scope = "planet" },
		func(c *Crawl) { c.MaxInFlightPerDomain = 0 },
		func(c *Crawl) { c.Delay = -1 },
		func(c *Crawl) { c.UserAgent = "a\nb" },
		func(c *Crawl) { c.RobotsTTL = Duration(48 * time.Hour) },
		func(c *Crawl) { c.Resolve = map[string]string{"host:80": "not-an-ip"} },
		func(c *Crawl) { c.MaxPages = -1 },
	}
	for i, mutate := range bad {
		c := New("x")
		c.Seeds = []Seed{{URL: "http://example.com/"}}
		mutate(c)
		if err := c.Validate(); err == nil {
			t.Errorf("case %d: invalid configuration accepted", i)
		}
	}
	if hp, addr, err := ParseResolve("Site.Test:8080:127.0.0.1"); err != nil || hp != "site.test:8080" || addr != "127.0.0.1" {
		t.Errorf("ParseResolve = %q %q %v", hp, addr, err)
	}
	if _, addr, err := ParseResolve("h:443:[::1]"); err != nil || addr != "::1" {
		t.Errorf("ParseResolve IPv6 = %q %v", addr, err)
	}
	for _, s := range []string{"h", "h:80", "h:0:1.2.3.4", "h:x:1.2.3.4", "h:80:nope"} {
		if _, _, err := ParseResolve(s); err == nil {
			t.Errorf("ParseResolve(%q) accepted", s)
		}
	}
	c = New("i")
	c.Delay, c.MaxCrawlDelay = Duration(time.Second), Duration(5*time.Second)
	if c.Interval(0) != time.Second || c.Interval(3*time.Second) != 3*time.Second || c.Interval(time.Minute) != 5*time.Second {
		t.Error("Interval: want max(delay, min(crawl-delay, cap))")
	}
}

func TestDomainTransitions(t *testing.T) {
	legal := [][2]DomainStatus{
		{DomainPending, DomainActive}, {DomainActive, DomainExhausted}, {DomainActive, DomainBlocked},
		{DomainActive, DomainUnreachable}, {DomainBlocked, DomainPending}, {DomainUnreachable, DomainPending},
		{DomainExhausted, DomainActive}, {DomainPending, DomainBlocked}, {DomainActive, DomainActive},
	}
	for _, tr := range legal {
		if !CanTransitionDomain(tr[0], tr[1]) {
			t.Errorf("%s -> %s refused", tr[0], tr[1])
		}
	}
	illegal := [][2]DomainStatus{{DomainExhausted, DomainBlocked}, {DomainBlocked, DomainExhausted}, {DomainUnreachable, DomainBlocked}, {DomainExhausted, DomainUnreachable}}
	for _, tr := range illegal {
		if CanTransitionDomain(tr[0], tr[1]) {
			t.Errorf("%s -> %s allowed", tr[0], tr[1])
		}
	}
	d := NewDomain("example.com", "example.com", time.Now())
	if err := d.SetStatus(DomainExhausted, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := d.SetStatus(DomainBlocked, ReasonForbidden, ""); !errors.Is(err, ErrIllegalDomainTransition) || d.Status != DomainExhausted {
		t.Errorf("illegal transition: %v, status %s", err, d.Status)
	}
	d.Status, d.ConsecutiveErrorCount = DomainBlocked, 5
	d.Robots["http://example.com"] = &RobotsCache{}
	d.Reset(time.Now())
	if d.Status != DomainPending || d.Reason != ReasonReset || d.ConsecutiveErrorCount != 0 || len(d.Robots) != 0 {
		t.Errorf("reset: %+v", d)
	}
}

func TestStoreAndQueue(t *testing.T) {
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(s, "q")
	if err != nil {
		t.Fatal(err)
	}
	c := New("q")
	c.Seeds = []Seed{{URL: "http://example.com/"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	if err := st.Create(c); !errors.Is(err, ErrExists) {
		t.Errorf("second Create = %v, want ErrExists", err)
	}
	if names, _ := List(s); len(names) != 1 || names[0] != "q" {
		t.Errorf("List = %v", names)
	}
	got, err := st.Update(func(c *Crawl) error { c.State = Paused; return nil })
	if err != nil || got.State != Paused {
		t.Fatalf("Update = %v, %v", got, err)
	}
	if c, _ := st.Load(); c.State != Paused {
		t.Errorf("Load after Update: %s", c.State)
	}

	// Queue segments: append, read at offsets, repair a torn tail.
	dir := st.QueueDir("example.com:8080")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "1_0.jsonl")
	var es []Entry
	for i := 0; i < 50; i++ {
		es = append(es, Entry{URL: "http://example.com/" + strings.Repeat("x", i), Depth: 1})
	}
	size, err := AppendEntries(path, es)
	if err != nil {
		t.Fatal(err)
	}
	got1, ends, err := ReadEntries(path, 0, 3)
	if err != nil || len(got1) != 3 || got1[2].URL != es[2].URL {
		t.Fatalf("ReadEntries = %v, %v", got1, err)
	}
	rest, _, err := ReadEntries(path, ends[2], 1000)
	if err != nil || len(rest) != 47 || rest[46].URL != es[49].URL {
		t.Fatalf("ReadEntries from an offset: %d entries, %v", len(rest), err)
	}
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"url":"http://exa`)
	f.Close()
	nsize, lines, err := RepairTail(path, ends[2])
	if err != nil || nsize != size || lines != 47 {
		t.Errorf("RepairTail = %d, %d, %v; want %d, 47", nsize, lines, err, size)
	}
	if fi, _ := os.Stat(path); fi.Size() != size {
		t.Errorf("torn tail not truncated: %d bytes, want %d", fi.Size(), size)
	}
	if un := escapeName("a.b:80"); un != "a.b%3A80" {
		t.Errorf("escapeName = %q", un)
	}
}

func TestDomainOfAndScope(t *testing.T) {
	for in, want := range map[string][2]string{
		"http://www.Example.com/x":     {"example.com", "example.com"},
		"http://blog.example.co.uk:80": {"blog.example.co.uk", "example.co.uk"},
		"http://a.site.test:8080/":     {"a.site.test:8080", "site.test"},
		"https://[::1]:8443/":          {"[::1]:8443", "[::1]"},
	} {
		d, p, err := DomainOf(in)
		if err != nil || d != want[0] || p != want[1] {
			t.Errorf("DomainOf(%q) = %q, %q, %v; want %v", in, d, p, err, want)
		}
	}
	c := New("s")
	c.Seeds = []Seed{{URL: "http://www.a.site.test:8080/docs/"}}
	_ = c.Validate()
	for scope, cases := range map[Scope]map[string]bool{
		ScopeHost:   {"http://a.site.test:8080/x": true, "http://b.site.test:8080/": false, "http://a.site.test:8081/": false},
		ScopeDomain: {"http://b.site.test:8080/": true, "http://b.site.test:9/": true, "http://other.test/": false},
		ScopePrefix: {"http://www.a.site.test:8080/docs/a": true, "http://www.a.site.test:8080/blog": false},
	} {
		c.Scope = scope
		sc, err := NewScoper(c)
		if err != nil {
			t.Fatal(err)
		}
		for u, want := range cases {
			if got, why := sc.InScope(u); got != want {
				t.Errorf("scope %s: InScope(%s) = %v (%s), want %v", scope, u, got, why, want)
			}
		}
	}
}

// The crawl's JSON Lines files are read without waiting on a FIFO or
// following a symlink planted in their place: an error, never a blocked
// frontier or farroctl.
func TestScanLinesRefusesHostileEntries(t *testing.T) {
	t.Parallel()
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(s, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(st.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(st.Path(OutcomesFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", st.Path(SitemapsFile)); err != nil {
		t.Fatal(err)
	}
	done := make(chan [2]error, 1)
	go func() {
		e1 := st.ScanOutcomes(func(*Outcome) bool { return true })
		e2 := st.ScanSitemapLines(func(*SitemapLine) {})
		done <- [2]error{e1, e2}
	}()
	select {
	case errs := <-done:
		if errs[0] == nil || errs[1] == nil {
			t.Fatalf("a FIFO outcomes.jsonl and a symlinked sitemaps.jsonl read without error: %v", errs)
		}
	case <-time.After(5 * time.Second):
		// Unblock the reader so the test ends.
		if f, err := os.OpenFile(st.Path(OutcomesFile), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatal("scanning a FIFO outcomes.jsonl blocked")
	}
}
