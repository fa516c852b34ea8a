package frontier

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// writeDomains writes n domain files with one URL queued each, written
// directly as a fixture; ready names the one domain whose next release
// time has come, the others wait an hour.
func writeDomains(t *testing.T, st *crawl.Store, n int, ready string, now time.Time) {
	t.Helper()
	later := now.Add(time.Hour)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("d%05d.test", i)
		dd := crawl.NewDomain(name, name, now)
		seg := dd.Segment(0, 0)
		u := "http://" + name + "/"
		dir := st.QueueDir(name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(&crawl.Entry{URL: u, At: now})
		line = append(line, '\n')
		if err := os.WriteFile(filepath.Join(dir, seg.File), line, 0o644); err != nil {
			t.Fatal(err)
		}
		seg.Size, seg.Count = int64(len(line)), 1
		dd.PagesDiscovered = 1
		if name != ready {
			at := later
			dd.NextReleaseAt = &at
		}
		if err := os.WriteFile(st.Path(crawl.DomainsDir, crawl.DomainFile(name)), dd.Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReleasePassVisitsReadyOnly: a crawl that knows 500 domains, of
// which one may release now, starts with at most its cache's 2 entities
// in memory, and a release pass reads one entity from disk (the ready
// domain's) and visits O(1) summaries; the ready domain's URL is
// released, no other. A pass that looked at every domain known (the
// eligibility check of each entity) reads or visits them all.
func TestReleasePassVisitsReadyOnly(t *testing.T) {
	t.Parallel()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := crawl.New("big")
	c.Seeds = []crawl.Seed{{URL: "http://d00000.test/"}}
	c.ObeyRobots = false
	c.AllowPrivate = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(s, "big")
	if err := st.Create(c); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteFrontier(&crawl.Frontier{Seeded: true, Tallied: true}); err != nil {
		t.Fatal(err)
	}
	const n = 500
	now := time.Now().UTC()
	ready := "d00321.test"
	writeDomains(t, st, n, ready, now)
	if err := fsq.MkdirDurable(s.Path(crawl.Dir)); err != nil {
		t.Fatal(err)
	}

	f := New(Config{Spool: s, Log: zerolog.Nop(), DomainCache: 2})
	d, err := openDriver(f, st)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	if len(d.sums) != n || d.pendingTotal() != n {
		t.Fatalf("%d domains known, %d URLs pending; want %d, %d", len(d.sums), d.pendingTotal(), n, n)
	}
	if got := d.lru.Len(); got > 2 {
		t.Errorf("%d entities in memory after the start, want at most the cache's 2", got)
	}
	d.loads, d.visits = 0, 0
	d.releasePass(context.Background(), time.Now().UTC())
	if d.loads > 1 {
		t.Errorf("the release pass read %d domain files, want 1 (the ready domain's)", d.loads)
	}
	// The ready domain is visited twice (its round, then the round that
	// finds nothing), each time with the heap nodes at the border.
	if d.visits > 8 {
		t.Errorf("the release pass visited %d summaries of %d domains, want O(1)", d.visits, n)
	}
	if len(d.inflight) != 1 {
		t.Fatalf("%d jobs released, want 1: %v", len(d.inflight), d.inflight)
	}
	for id, name := range d.inflight {
		if name != ready {
			t.Errorf("released %s of %s, want the URL of %s", id, name, ready)
		}
		if _, err := s.Locate(id); err != nil {
			t.Errorf("released job %s not in the spool: %v", id, err)
		}
	}
	if err := d.persist(); err != nil {
		t.Fatal(err)
	}
	if got := d.lru.Len(); got > 2 {
		t.Errorf("%d entities in memory after persist, want at most 2", got)
	}
	dd, err := st.LoadDomain(ready)
	if err != nil {
		t.Fatal(err)
	}
	if len(dd.InFlight) != 1 || dd.PagesReleased != 1 || dd.Pending() != 0 {
		t.Errorf("%s on disk: %d in flight, %d released, %d pending; want 1, 1, 0", ready, len(dd.InFlight), dd.PagesReleased, dd.Pending())
	}
}
