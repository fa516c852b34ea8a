package pipeline_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/fetch"
	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/pipeline/livesite"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/internal/testcluster"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// env runs the frontier, managerd's policy and an agent with the crawl
// and source.check handlers in this process, over a temp spool, against
// a live site the test edits.
type env struct {
	t     *testing.T
	spool *job.Spool
	site  *livesite.Site
	c     *testcluster.Cluster
}

func startEnv(t *testing.T) *env {
	t.Helper()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	site := livesite.Start()
	t.Cleanup(site.Close)
	c := testcluster.Start(t, s, testcluster.Config{Concurrency: 3, Rescan: time.Second, Poll: 20 * time.Millisecond,
		Handlers: func(fh *fetch.Handler) map[string]agent.Handler {
			return map[string]agent.Handler{pipeline.KindCheck: pipeline.NewCheckHandler(s, fh)}
		}})
	return &env{t: t, spool: s, site: site, c: c}
}

func (e *env) stop() { e.c.Stop() }

// addSource registers a source on the live site (host, path), with fast
// politeness for tests.
func (e *env) addSource(name, host, path string, edit func(s *source.Source)) *source.Source {
	e.t.Helper()
	s := source.New(name, e.site.URL(host, path))
	s.AllowPrivate = true
	hp, addr, _ := crawl.ParseResolve(e.site.Resolve(host))
	s.Resolve = map[string]string{hp: addr}
	s.Delay = crawl.Duration(5 * time.Millisecond)
	s.Every = crawl.Duration(time.Hour)
	s.Jitter = 0
	s.MaxDepth = 3
	s.Timeout = crawl.Duration(5 * time.Second)
	if edit != nil {
		edit(s)
	}
	if err := source.Create(e.spool, s, time.Now().UTC()); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) run(o pipeline.RunOptions) *pipeline.Report {
	e.t.Helper()
	if o.Mode == "" {
		o.Mode = pipeline.ModeRun
	}
	if o.Jobs == nil {
		o.Jobs = spoolstore.New(e.spool)
	}
	rep, err := pipeline.Run(e.spool, o)
	if err != nil {
		e.t.Fatal(err)
	}
	if rep.Errors > 0 {
		e.t.Fatalf("run errors: %+v", rep)
	}
	return rep
}

func (e *env) source(name string) *source.Source {
	e.t.Helper()
	s, err := source.Load(e.spool, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// makeDue moves the source's next check to the past (as time passing
// would).
func (e *env) makeDue(name string) {
	e.t.Helper()
	if _, err := source.Update(e.spool, name, time.Now().UTC(), func(s *source.Source) error {
		t := time.Now().UTC().Add(-time.Second)
		s.NextCheckAfter = &t
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

// waitFor polls cond until it holds (the daemons signal nothing this test
// could wait on in-process other than the files they write).
func (e *env) waitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitJobsDone waits until no job is queued, deferred, held, in progress,
// stale or failed.
func (e *env) waitJobsDone(timeout time.Duration) {
	e.t.Helper()
	e.waitFor("every job terminal", timeout, func() bool { return e.liveJobs() == 0 })
}

func (e *env) liveJobs() int {
	n := 0
	for _, st := range []job.State{job.Queued, job.Deferred, job.Held, job.Stale, job.Failed} {
		ents, _ := os.ReadDir(e.spool.StateDir(st))
		for _, x := range ents {
			if !strings.HasSuffix(x.Name(), job.LockSuffix) && !strings.HasPrefix(x.Name(), ".") {
				n++
			}
		}
	}
	agents, _ := os.ReadDir(e.spool.StateDir(job.InProgress))
	for _, a := range agents {
		ents, _ := os.ReadDir(filepath.Join(e.spool.StateDir(job.InProgress), a.Name()))
		for _, x := range ents {
			if !strings.HasPrefix(x.Name(), ".") { // the agent's lock pool
				n++
			}
		}
	}
	return n
}

// waitCrawl waits until the crawl is in state want with run at least run.
func (e *env) waitCrawl(name string, want crawl.State, run int) *crawl.Crawl {
	e.t.Helper()
	st, err := crawl.Open(e.spool, name)
	if err != nil {
		e.t.Fatal(err)
	}
	var c *crawl.Crawl
	e.waitFor("crawl "+name+" "+string(want), 30*time.Second, func() bool {
		c, err = st.Load()
		return err == nil && c.State == want && c.Run >= run
	})
	return c
}

func (e *env) store(name string) *crawl.Store {
	st, err := crawl.Open(e.spool, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// bodies lists the crawl's stored bodies (sha256 names).
func (e *env) bodies(name string) []string {
	var out []string
	_ = filepath.WalkDir(e.store(name).Path(crawl.BodiesDir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, d.Name())
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// outcomes returns the crawl's outcome lines.
func (e *env) outcomes(name string) []crawl.Outcome {
	var out []crawl.Outcome
	if err := e.store(name).ScanOutcomes(func(o *crawl.Outcome) bool { out = append(out, *o); return true }); err != nil {
		e.t.Fatal(err)
	}
	return out
}
