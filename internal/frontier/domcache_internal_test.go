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
	"github.com/farro-dev/farro/pkg/fsq/fsqtest"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// writeDomains writes n domain files with one URL queued each, written
// directly as a fixture; ready names the domains whose next release time
// has come, the others wait an hour.
func writeDomains(t *testing.T, st *crawl.Store, n int, now time.Time, ready ...string) {
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
		isReady := false
		for _, r := range ready {
			isReady = isReady || r == name
		}
		if !isReady {
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
	const n = 500
	now := time.Now().UTC()
	ready := "d00321.test"
	s, st := fixtureCrawl(t, n, now, ready)
	f := New(Config{Spool: s, Store: spoolstore.New(s), Log: zerolog.Nop(), DomainCache: 2})
	d, err := openDriver(f, st)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	checkReleasePass(t, d, s, st, n, ready)
}

// fixtureCrawl creates crawl "big" of n domains, the ones named in ready
// free to release now.
func fixtureCrawl(t *testing.T, n int, now time.Time, ready ...string) (*job.Spool, *crawl.Store) {
	t.Helper()
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
	writeDomains(t, st, n, now, ready...)
	if err := fsq.MkdirDurable(s.Path(crawl.Dir)); err != nil {
		t.Fatal(err)
	}
	return s, st
}

func checkReleasePass(t *testing.T, d *driver, s *job.Spool, st *crawl.Store, n int, ready string) {
	t.Helper()
	if len(d.sums) != n || d.pendingTotal() != int64(n) {
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

// TestHostileDomainFileWhileRunning: the file of a domain evicted from the
// cache becomes a FIFO, a socket, a directory, a 1 GiB sparse file or a
// symlink while the crawl runs. The release pass that needs it neither
// blocks nor stops: the domain is logged and left alone (its file not
// read again), and the other ready domain is released.
func TestHostileDomainFileWhileRunning(t *testing.T) {
	t.Parallel()
	for _, kind := range fsqtest.HostileKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			now := time.Now().UTC()
			bad, good := "d00003.test", "d00017.test"
			s, st := fixtureCrawl(t, 20, now, bad, good)
			f := New(Config{Spool: s, Store: spoolstore.New(s), Log: zerolog.Nop(), DomainCache: 2})
			d, err := openDriver(f, st)
			if err != nil {
				t.Fatal(err)
			}
			defer d.close()
			if d.cached(bad) != nil {
				t.Fatalf("%s still cached: the test needs it read back from its file", bad)
			}
			path := st.Path(crawl.DomainsDir, crawl.DomainFile(bad))
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			fsqtest.PlantHostile(t, path, kind)
			done := make(chan struct{})
			go func() {
				defer close(done)
				d.releasePass(context.Background(), time.Now().UTC())
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the release pass is blocked on the hostile domain file")
			}
			if len(d.inflight) != 1 {
				t.Fatalf("%d jobs released, want 1 (of %s): %v", len(d.inflight), good, d.inflight)
			}
			for _, name := range d.inflight {
				if name != good {
					t.Errorf("released a URL of %s, want %s", name, good)
				}
			}
			loads := d.loads
			d.releasePass(context.Background(), time.Now().UTC())
			if d.loads != loads {
				t.Errorf("the hostile file was read again (%d reads)", d.loads-loads)
			}
			if d.pendingTotal() != 19 {
				t.Errorf("%d URLs pending, want 19 (the hostile domain's kept)", d.pendingTotal())
			}
		})
	}
}
