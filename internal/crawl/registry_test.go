package crawl

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

func testSpool(t *testing.T) *job.Spool {
	t.Helper()
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRegistryObserveAndAdopt: what a crawl's domain writes to the
// registry, and what a crawl meeting the domain takes from it.
func TestRegistryObserveAndAdopt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	c := New("one")
	c.Cooldowns = DefaultCooldowns()

	// A login wall: blocked for the crawl's login-wall cooldown.
	d := NewDomain("c.test", "c.test", now)
	until := now.Add(30 * 24 * time.Hour)
	d.Status, d.Reason, d.NextCrawlAfter = DomainBlocked, ReasonLoginRequired, &until
	e, refused := Observe(nil, c, d, true, now)
	if refused != nil || e.Status != DomainBlocked || e.Reason != ReasonLoginRequired || !sameTime(e.CooldownUntil, &until) || e.StatusCrawl != "one" || e.FirstBlockedAt == nil {
		t.Fatalf("blocked domain observed: %+v %v", e, refused)
	}
	// A new crawl meeting it starts it blocked, held until the cooldown.
	d2 := NewDomain("c.test", "c.test", now)
	if !Adopt(e, d2, now.Add(time.Hour)) || d2.Status != DomainBlocked || d2.Reason != ReasonLoginRequired || !sameTime(d2.NextCrawlAfter, &until) || d2.RegistryHold != DomainBlocked {
		t.Fatalf("adopted blocked: %+v", d2)
	}
	// After the cooldown, it starts pending.
	d3 := NewDomain("c.test", "c.test", now)
	if Adopt(e, d3, until.Add(time.Second)) || d3.Status != DomainPending {
		t.Fatalf("adopted after the cooldown: %+v", d3)
	}
	// The holding crawl's view never rewrites the registry's status.
	c2 := New("two")
	if e2, _ := Observe(e, c2, d2, true, now.Add(time.Hour)); e2.StatusCrawl != "one" || len(e2.CrawlNames()) != 2 {
		t.Errorf("held domain observed: %+v", e2)
	}
	// A crawl that had the domain active before cannot undo the block
	// while it cools down: blocked -> exhausted is refused, counters kept.
	d4 := NewDomain("c.test", "c.test", now)
	d4.Status, d4.PagesCrawled = DomainExhausted, 7
	e3, refused := Observe(e, New("three"), d4, true, now.Add(time.Hour))
	if !errors.Is(refused, ErrIllegalDomainTransition) || e3.Status != DomainBlocked || e3.Crawls["three"].PagesCrawled != 7 {
		t.Errorf("exhausted over a cooling block: %+v %v", e3, refused)
	}
	// Once it is over, the same change is legal (through pending).
	if e4, refused := Observe(e3, New("three"), d4, true, until.Add(time.Second)); refused != nil || e4.Status != DomainExhausted {
		t.Errorf("exhausted after the block's cooldown: %+v %v", e4, refused)
	}

	// private_address is the crawl's setting, not the domain's.
	p := NewDomain("p.test", "p.test", now)
	p.Status, p.Reason = DomainBlocked, ReasonPrivateAddress
	if e, _ := Observe(nil, c, p, true, now); e.Status != DomainPending {
		t.Errorf("private_address carried over: %+v", e)
	}
	// Given up (no retry planned): rests the crawl's cooldown for its reason.
	g := NewDomain("g.test", "g.test", now)
	g.Status, g.Reason = DomainBlocked, ReasonForbidden
	if e, _ := Observe(nil, c, g, true, now); e.CooldownUntil == nil || !e.CooldownUntil.Equal(now.Add(DefaultForbiddenCooldown)) {
		t.Errorf("given-up domain: %+v", e)
	}

	// Exhausted: the whole site fetched -> exhausted; a budget or a prefix
	// scope -> active (partly crawled).
	x := NewDomain("x.test", "x.test", now)
	x.Status, x.PagesCrawled = DomainExhausted, 3
	ex, _ := Observe(nil, c, x, true, now)
	if ex.Status != DomainExhausted {
		t.Fatalf("exhausted domain: %+v", ex)
	}
	x.Reason = ReasonBudget
	if e, _ := Observe(nil, c, x, true, now); e.Status != DomainActive {
		t.Errorf("exhausted on a budget: %+v", e)
	}
	x.Reason = ""
	cp := New("prefix")
	cp.Scope = ScopePrefix
	if e, _ := Observe(nil, cp, x, true, now); e.Status != DomainActive {
		t.Errorf("exhausted in a prefix crawl: %+v", e)
	}
	// A crawl meeting an exhausted domain holds it.
	x2 := NewDomain("x.test", "x.test", now)
	if !Adopt(ex, x2, now) || !x2.Held() || x2.Reason != ReasonRegistryExhausted {
		t.Fatalf("adopted exhausted: %+v", x2)
	}
	if ex.Releases(DomainExhausted, now) || e.Releases(DomainBlocked, now) {
		t.Error("an exhausted or blocked entry released its hold")
	}
	ex.Reset("by test", now)
	e.Reset("by test", now)
	if !ex.Releases(DomainExhausted, now) || !e.Releases(DomainBlocked, now) {
		t.Error("a reset entry does not release the hold")
	}
	// Leaving the held status clears the hold.
	if err := x2.SetStatus(DomainPending, ReasonReset, ""); err != nil || x2.RegistryHold != "" {
		t.Errorf("hold after a status change: %q %v", x2.RegistryHold, err)
	}
	// Lifetime counters are the sums over the crawls.
	ex, _ = Observe(ex, New("other"), &Domain{Domain: "x.test", Status: DomainActive, PagesCrawled: 4, PagesNew: 2, TotalErrorCount: 1}, false, now)
	ex.sum()
	if ex.PagesCrawled != 7 || ex.Errors != 1 || ex.Yield != 2.0/7 {
		t.Errorf("lifetime counters: %+v", ex)
	}
}

// TestRegistryFiles: atomic writes, a newer schema refused and left in
// place, a hostile file moved to corrupt/ with one error, never a hang.
func TestRegistryFiles(t *testing.T) {
	t.Parallel()
	s := testSpool(t)
	r := OpenRegistry(s)
	now := time.Now().UTC()
	c := New("one")
	d := NewDomain("a.test", "a.test", now)
	errs, err := r.Update([]string{"a.test"}, func(_ string, e *RegistryEntry) *RegistryEntry {
		out, _ := Observe(e, c, d, true, now)
		return out
	})
	if err != nil || len(errs) != 0 {
		t.Fatal(err, errs)
	}
	e, err := r.Load("a.test")
	if err != nil || e.SchemaVersion != RegistrySchemaVersion || e.Version != 1 || e.Crawls["one"] == nil {
		t.Fatalf("entry read back: %+v %v", e, err)
	}
	if _, err := r.Load("none.test"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing entry: %v", err)
	}

	// A newer schema: refused, not overwritten.
	newer := []byte(`{"schema_version": 99, "domain": "n.test", "status": "pending"}`)
	if err := os.WriteFile(r.Path("n.test"), newer, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Load("n.test"); !errors.Is(err, ErrRegistrySchema) || !strings.Contains(err.Error(), "version 99") {
		t.Errorf("newer schema: %v", err)
	}
	errs, err = r.Update([]string{"n.test"}, func(_ string, e *RegistryEntry) *RegistryEntry {
		return &RegistryEntry{Domain: "n.test", Status: DomainPending, Crawls: map[string]*RegistryCrawl{}}
	})
	if err != nil || !errors.Is(errs["n.test"], ErrRegistrySchema) {
		t.Errorf("update of a newer file: %v %v", err, errs)
	}
	if b, _ := os.ReadFile(r.Path("n.test")); string(b) != string(newer) {
		t.Errorf("newer file overwritten: %s", b)
	}

	// Hostile files: garbage, a FIFO, one too large, a symlink.
	if err := os.WriteFile(r.Path("g.test"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(r.Path("f.test"), 0o644); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(r.Path("big.test"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(MaxRegistryFileSize + 1); err != nil {
		t.Fatal(err)
	}
	big.Close()
	if err := os.Symlink("/etc/passwd", r.Path("l.test")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"g.test", "f.test", "big.test", "l.test"} {
		done := make(chan error, 1)
		go func() { _, err := r.Load(n); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrRegistryCorrupt) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: %v", n, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Load blocked", n)
		}
		if _, err := os.Lstat(r.Path(n)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left in the registry: %v", n, err)
		}
	}
	q, _ := os.ReadDir(s.Path(job.CorruptDir))
	if len(q) < 8 { // each file and its note
		t.Errorf("corrupt/ holds %d entries, want the 4 files and their notes", len(q))
	}
	// Listing skips nothing readable and reports nothing left.
	var bad []string
	es, err := r.Entries(func(n string, err error) { bad = append(bad, n) })
	if err != nil || len(es) != 1 || es[0].Domain != "a.test" || len(bad) != 1 || bad[0] != "n.test.json" {
		t.Errorf("entries: %d %v %v", len(es), bad, err)
	}
}

// TestMigrateRegistry: an existing spool's per-crawl files build the
// registry; the most restrictive status wins, the latest among equals;
// a dry run writes nothing.
func TestMigrateRegistry(t *testing.T) {
	t.Parallel()
	s := testSpool(t)
	now := time.Now().UTC()
	mk := func(name string, doms ...*Domain) {
		st, err := Open(s, name)
		if err != nil {
			t.Fatal(err)
		}
		c := New(name)
		c.Seeds = []Seed{{URL: "http://a.test/"}}
		if err := st.Create(c); err != nil {
			t.Fatal(err)
		}
		for _, d := range doms {
			if err := st.WriteDomain(d, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	dom := func(name string, st DomainStatus, reason string, updated time.Time, crawled int64) *Domain {
		d := NewDomain(name, name, updated)
		d.Status, d.Reason, d.UpdatedAt, d.PagesCrawled = st, reason, updated, crawled
		return d
	}
	until := now.Add(time.Hour)
	blocked := dom("b.test", DomainBlocked, ReasonForbidden, now.Add(-2*time.Hour), 1)
	blocked.NextCrawlAfter = &until
	mk("old", dom("a.test", DomainExhausted, "", now.Add(-time.Hour), 5), blocked, dom("c.test", DomainActive, "", now.Add(-time.Hour), 2))
	mk("new", dom("a.test", DomainActive, "", now, 1), dom("b.test", DomainActive, "", now, 0), dom("c.test", DomainExhausted, "", now, 4))

	plan, err := MigrateRegistry(s, true, now, func(err error) { t.Error(err) })
	if err != nil || len(plan) != 3 {
		t.Fatalf("dry run: %d %v", len(plan), err)
	}
	r := OpenRegistry(s)
	if _, err := os.Stat(r.Dir); !errors.Is(err, fs.ErrNotExist) || r.Built() {
		t.Errorf("a dry run wrote the registry: %v", err)
	}
	if _, err := MigrateRegistry(s, false, now, func(err error) { t.Error(err) }); err != nil {
		t.Fatal(err)
	}
	if !r.Built() {
		t.Error("registry not marked built")
	}
	want := map[string]struct {
		st    DomainStatus
		by    string
		pages int64
	}{
		"a.test": {DomainExhausted, "old", 6}, // exhausted beats a later active
		"b.test": {DomainBlocked, "old", 1},   // a cooldown not over beats all
		"c.test": {DomainExhausted, "new", 6},
	}
	for dn, w := range want {
		e, err := r.Load(dn)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != w.st || e.StatusCrawl != w.by || e.PagesCrawled != w.pages || len(e.Crawls) != 2 {
			t.Errorf("%s: %s by %s, %d pages, crawls %v; want %+v", dn, e.Status, e.StatusCrawl, e.PagesCrawled, e.CrawlNames(), w)
		}
	}
	// Again: the same entries (merged, not doubled).
	if _, err := MigrateRegistry(s, false, now, nil); err != nil {
		t.Fatal(err)
	}
	if e, _ := r.Load("a.test"); e.PagesCrawled != 6 || e.Status != DomainExhausted {
		t.Errorf("migrated twice: %+v", e)
	}
}
