package frontier_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/frontier"
	"github.com/farro-dev/farro/internal/testcluster"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// calls records what the frontier asked of its job store.
type calls struct {
	mu        sync.Mutex
	batches   []int           // Submit: requests per call
	submitted map[string]int  // Submit: by job ID
	read      map[string]bool // GetDir
	watches   int             // WatchFinished
}

func newCalls() *calls {
	return &calls{submitted: map[string]int{}, read: map[string]bool{}}
}

// plainStore is a job store seen only through store.Store and store.Dirs:
// it offers no wake-ups.
type plainStore struct {
	store.Store
	dirs store.Dirs
	c    *calls
}

func (s *plainStore) Submit(ctx context.Context, reqs []job.SubmitRequest) ([]*job.Job, []error) {
	s.c.mu.Lock()
	s.c.batches = append(s.c.batches, len(reqs))
	for _, r := range reqs {
		s.c.submitted[r.ID]++
	}
	s.c.mu.Unlock()
	return s.Store.Submit(ctx, reqs)
}

func (s *plainStore) GetDir(ctx context.Context, id string, hint job.State) (*job.Job, job.Location, error) {
	s.c.mu.Lock()
	s.c.read[id] = true
	s.c.mu.Unlock()
	return s.dirs.GetDir(ctx, id, hint)
}

// watchingStore adds the spool store's wake-ups.
type watchingStore struct {
	*plainStore
	fw store.FinishWatcher
}

func (s *watchingStore) WatchFinished(ctx context.Context, o store.WatchOptions) (<-chan store.Finished, func()) {
	s.c.mu.Lock()
	s.c.watches++
	s.c.mu.Unlock()
	return s.fw.WatchFinished(ctx, o)
}

// noDirsStore is a job store that keeps no job in a directory here, as a
// database store.
type noDirsStore struct{ store.Store }

// crawlSeam crawls a small plain site through jobs (a wrapper of the
// spool store) and checks that every job of the crawl was submitted, and
// every finished one read, through it: the frontier reaches no job
// around its store.
func crawlSeam(t *testing.T, jobs func(s *spoolstore.Store, c *calls) store.Store, rescan time.Duration) *calls {
	t.Helper()
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 3, Levels: 2})
	defer site.Close()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := newCalls()
	ss := spoolstore.New(s)
	cl := testcluster.Start(t, s, testcluster.Config{Concurrency: 4, Rescan: rescan, Poll: 20 * time.Millisecond, Store: jobs(ss, c)})
	cfg := plainCrawl(site, "seam")
	cfg.Seeds = cfg.Seeds[:1]
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st, _ := crawl.Open(s, "seam")
	if err := st.Create(cfg); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, crawl.Done, 30*time.Second)
	cl.Stop()

	var ids []string
	if err := ss.List(context.Background(), store.Filter{}, func(j *job.Job) error {
		if _, name, ok := crawl.ParseJobID(j.ID); ok && name == "seam" {
			ids = append(ids, j.ID)
			if !j.Status.Terminal() {
				t.Errorf("job %s is %s in a done crawl", j.ID, j.Status)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pages, _ := pageCounts(site.Log())
	if pages == 0 || len(ids) < pages {
		t.Fatalf("%d jobs of the crawl for %d pages fetched", len(ids), pages)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, b := range c.batches {
		n += b
	}
	if n != len(ids) || len(c.submitted) != len(ids) {
		t.Errorf("%d requests in %d Submit calls for %d distinct IDs; the spool holds %d jobs of the crawl", n, len(c.batches), len(c.submitted), len(ids))
	}
	for _, id := range ids {
		if c.submitted[id] != 1 {
			t.Errorf("job %s: submitted %d times through the store, want once", id, c.submitted[id])
		}
		if !c.read[id] {
			t.Errorf("job %s finished but was never read through the store (GetDir)", id)
		}
	}
	// The results were read from the directories the store gave: every
	// page's outcome carries its HTTP status from the fetch's artifact.
	fetched := 0
	if err := st.ScanOutcomes(func(o *crawl.Outcome) bool {
		if o.Outcome == crawl.OutcomeFetched {
			fetched++
			if o.HTTPStatus != 200 {
				t.Errorf("outcome of %s: HTTP status %d, want 200 from its artifact", o.URL, o.HTTPStatus)
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if fetched != pages {
		t.Errorf("%d fetched outcomes, %d pages served", fetched, pages)
	}
	return c
}

// TestJobsThroughStore: with the spool store's wake-ups, the crawl's
// submits and reads all go through the store.
func TestJobsThroughStore(t *testing.T) {
	c := crawlSeam(t, func(s *spoolstore.Store, c *calls) store.Store {
		return &watchingStore{plainStore: &plainStore{Store: s, dirs: s, c: c}, fw: s}
	}, 2*time.Second)
	if c.watches != 1 {
		t.Errorf("WatchFinished called %d times, want 1", c.watches)
	}
}

// TestJobsThroughStoreNoWakeups: a store without wake-ups still runs a
// crawl to its end: the jobs in flight are looked up again through the
// store every rescan. The rescans run often and meet jobs whose commit
// is under way (job.json already says succeeded, the directory is not
// moved yet): such a job is not taken for finished, every page's
// outcome comes from its result.
func TestJobsThroughStoreNoWakeups(t *testing.T) {
	crawlSeam(t, func(s *spoolstore.Store, c *calls) store.Store {
		return &plainStore{Store: s, dirs: s, c: c}
	}, 20*time.Millisecond)
}

// TestRefusesStoreWithoutDirs: a job store whose jobs have no directory on
// this host (a database) cannot run a crawl; the frontier says so.
func TestRefusesStoreWithoutDirs(t *testing.T) {
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, jobs := range map[string]store.Store{"no store": nil, "no dirs": noDirsStore{spoolstore.New(s)}} {
		fr := frontier.New(frontier.Config{Spool: s, Store: jobs, Log: zerolog.Nop()})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := fr.Run(ctx)
		cancel()
		if !errors.Is(err, frontier.ErrNoDirs) || !strings.Contains(err.Error(), "spool store only") {
			t.Errorf("%s: Run = %v, want %v", name, err, frontier.ErrNoDirs)
		}
	}
}
