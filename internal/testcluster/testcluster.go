// Package testcluster runs the crawl's daemons in the test's process: the
// frontier, managerd's policy and one agent with the crawl handlers (and
// any others the test adds), over one spool. Tests of the frontier and of
// the content pipeline use it; the end-to-end suites (test/...) run the
// real binaries instead.
package testcluster

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/fetch"
	"github.com/farro-dev/farro/internal/frontier"
	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/internal/manager"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// Config says how to run the cluster.
type Config struct {
	Concurrency int           // agent slots
	Rescan      time.Duration // frontier, manager and agent rescans
	Poll        time.Duration // the frontier's poll
	DomainCache int           // the frontier's domain entity cache (0: its default)
	// Store, when not nil, is the frontier's job store (a test's wrapper
	// of the spool store, say); nil: spoolstore.New of the spool.
	Store store.Store
	// Handlers adds job kinds to the agent's crawl.fetch and crawl.robots;
	// it receives the fetch handler to share its clients.
	Handlers func(fh *fetch.Handler) map[string]agent.Handler
}

// Cluster is a running in-process cluster.
type Cluster struct {
	Frontier *frontier.Frontier
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
}

// Start runs the cluster over s until Stop (registered with t.Cleanup
// too). The daemons log as the real ones do (logx, at debug level) into a
// buffer whose every line is checked strictly when t ends (logxtest:
// one JSON object, no key twice); with -v the lines go to the test's log
// too.
func Start(t *testing.T, s *job.Spool, cfg Config) *Cluster {
	t.Helper()
	var w io.Writer = logxtest.New(t)
	if testing.Verbose() {
		w = io.MultiWriter(w, zerolog.NewTestWriter(t))
	}
	mlog := logx.New(w, manager.Actor, "debug")
	jobs := cfg.Store
	if jobs == nil {
		jobs = spoolstore.New(s)
	}
	fr := frontier.New(frontier.Config{Spool: s, Store: jobs, Log: mlog.With().Str("component", "frontier").Logger(), Rescan: cfg.Rescan, Poll: cfg.Poll, DomainCache: cfg.DomainCache})
	m := manager.New(spoolstore.New(s), manager.Config{BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Rescan: cfg.Rescan}, mlog)
	fh := fetch.NewHandler(s, nil)
	handlers := map[string]agent.Handler{crawl.KindFetch: fh, crawl.KindRobots: &fetch.RobotsHandler{Handler: fh}}
	if cfg.Handlers != nil {
		for k, h := range cfg.Handlers(fh) {
			handlers[k] = h
		}
	}
	a, err := agent.New(agent.Config{Spool: s, ID: "w1", Concurrency: cfg.Concurrency, Log: logx.New(w, "agentd/w1", "debug"), Rescan: cfg.Rescan, Handlers: handlers,
		DrainTimeout: 2 * time.Second}) // a test ends quickly: running jobs are released
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cluster{Frontier: fr, cancel: cancel}
	for _, run := range []func(context.Context) error{fr.Run, m.Run, a.Run} {
		c.wg.Add(1)
		go func(run func(context.Context) error) {
			defer c.wg.Done()
			if err := run(ctx); err != nil {
				t.Errorf("run: %v", err)
			}
		}(run)
	}
	t.Cleanup(c.Stop)
	return c
}

// Stop stops every daemon and waits for them.
func (c *Cluster) Stop() {
	c.once.Do(func() {
		c.cancel()
		c.wg.Wait()
	})
}
