package ctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// This file gives farroctl serve (internal/dashboard, through
// dashview.go) the PostgreSQL store: one connection pool for the
// server's lifetime, each request's work bounded by its context, and the
// readings of a dashboard page that the CLI's store paths (store.go,
// pgops.go) do not already have as values.

// Pool defaults of OpenStorePool.
const (
	PoolMaxConns = 4                // connections at most
	PoolTimeout  = 15 * time.Second // a command's work when no WithContext bounds it
)

// storePool is a PostgreSQL store shared by every command of a Ctl and
// its copies.
type storePool struct {
	st      *pgstore.Store
	timeout time.Duration
}

// OpenStorePool connects to the PostgreSQL store once (checking its
// schema) and returns a copy of c whose commands all use that one pool,
// of at most maxConns connections (PoolMaxConns when 0), instead of one
// each: farroctl serve's for its lifetime. A command's work ends with
// the context of WithContext, else after timeout (PoolTimeout when 0).
// A connection the database cut (a restart, pg_terminate_backend) fails
// the command that used it, and the pool opens a new one for the next.
// closePool closes the pool.
func (c *Ctl) OpenStorePool(maxConns int, timeout time.Duration) (pooled *Ctl, closePool func(), err error) {
	if !c.OnStore() {
		return nil, nil, fmt.Errorf("%q is not a PostgreSQL store", c.Store)
	}
	if maxConns <= 0 {
		maxConns = PoolMaxConns
	}
	if timeout <= 0 {
		timeout = PoolTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	st, err := pgstore.Open(ctx, c.Store, pgstore.WithMaxConns(maxConns))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %s", storeName(c.Store), oneLine(err.Error()))
	}
	cc := *c
	cc.pool, cc.ctx = &storePool{st: st, timeout: timeout}, nil
	return &cc, func() { _ = st.Close() }, nil
}

// WithContext returns a copy of c whose commands on its store pool
// (OpenStorePool) end when ctx does: a request's deadline.
func (c *Ctl) WithContext(ctx context.Context) *Ctl {
	cc := *c
	cc.ctx = ctx
	return &cc
}

// StoreName names the PostgreSQL store as messages do (host:port/db,
// never a password).
func (c *Ctl) StoreName() string { return storeName(c.Store) }

// pooled is openStore on the pool: the shared store, under the context
// of WithContext, else the pool's timeout; done never closes the pool.
func (c *Ctl) pooled() (store.Store, context.Context, func(), error) {
	if c.ctx != nil {
		ctx, cancel := context.WithCancel(c.ctx)
		return c.pool.st, ctx, cancel, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.pool.timeout)
	return c.pool.st, ctx, cancel, nil
}

// ErrSpoolOnly: what was asked is kept in a spool only, not in a
// PostgreSQL store; the error's text says where it is instead.
var ErrSpoolOnly = errors.New("kept in a spool only")

type spoolOnlyError struct{ msg string }

func (e *spoolOnlyError) Error() string        { return e.msg }
func (e *spoolOnlyError) Is(target error) bool { return target == ErrSpoolOnly }

// errCrawlsSpoolOnly is the crawl pages' answer on a database.
var errCrawlsSpoolOnly = &spoolOnlyError{msg: "Crawls run on a spool only for now (on PostgreSQL managerd runs no crawl frontier): " +
	"see a spool's crawls and domains with farroctl serve --spool DIR (without --store), or farroctl crawl ls --spool DIR"}

// storeOutput is OutputOf on a database: the output is not in it but on
// the host of the agent that ran the attempt, which the error names.
func (c *Ctl) storeOutput(arg string) error {
	var j *job.Job
	err := c.withStore(func(d *storeDoor) error {
		id, err := d.resolve(arg)
		if err != nil {
			return err
		}
		if j, err = d.st.Get(d.ctx, id); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	where := "on the host of each agent that ran it"
	if j.Agent != "" {
		where = "on the host of agent " + j.Agent
	}
	return &spoolOnlyError{msg: fmt.Sprintf("Output is not kept in the database: it stays %s, in that agentd's local directory (its --spool), "+
		"scratch/AGENT/%s/stdout.N.log and stderr.N.log (farroctl logs works on a spool only for now)", where, j.ID)}
}

// storeShape is ShapeOf on a database: every job listed once.
func (c *Ctl) storeShape() (*Shape, error) {
	sh := newShape(c.now())
	err := c.withStore(func(d *storeDoor) error {
		return d.st.List(d.ctx, store.Filter{}, func(j *job.Job) error {
			if sa := sh.Ages[j.Status]; sa != nil {
				sa.Total++
				sh.count(j.Status, j)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return sh, nil
}

// storeWorkers is WorkersOf on a database: top's snapshot of the running
// jobs and the agents (the overview reads the counts and the oldest
// queued job once, through StatsOf).
func (c *Ctl) storeWorkers() (doc TopDoc, err error) {
	err = c.withStore(func(d *storeDoor) error {
		doc, err = c.storeTopDoc(d, false)
		return err
	})
	return doc, err
}

// storeJobsPage is JobsPage on a database: the jobs of the states and
// kind selected, in ID order (newest first with Newest) read a page of
// rows at a time until the page and one more match are found; age and
// text are matched on the rows. Listed is the states' count (Counts);
// Matched is exact without kind, age or text.
func (c *Ctl) storeJobsPage(q JobQuery) (*JobPage, error) {
	p := &JobPage{Rows: []Row{}}
	text := strings.ToLower(q.Text)
	err := c.withStore(func(d *storeDoor) error {
		pg, err := d.pg()
		if err != nil {
			return err
		}
		counts, err := d.st.Counts(d.ctx)
		if err != nil {
			return err
		}
		states := q.States
		if len(states) == 0 {
			states = job.States
		}
		for _, st := range states {
			p.Listed += counts[st]
		}
		ps, err := pg.PausedKinds(d.ctx)
		if err != nil {
			return err
		}
		paused := map[string]bool{}
		for _, k := range ps {
			paused[k.Kind] = true
		}
		lim := d.limits()
		f := store.Filter{States: q.States}
		if q.Kind != "" {
			f.Kinds = []string{q.Kind}
		}
		matched := 0
		visit := func(j *job.Job) error {
			if !storeMatches(j, q, text) {
				return nil
			}
			if len(p.Rows) >= q.Limit {
				p.More = true
				return errEnough
			}
			if matched >= q.Offset {
				r := Row{ID: j.ID, Location: j.Status}
				r.fill(j, lim)
				r.KindPaused = j.Status == job.Queued && paused[j.Kind]
				p.Rows = append(p.Rows, r)
			}
			matched++
			return nil
		}
		if q.Newest {
			err = pg.ListNewestFirst(d.ctx, f, "", visit)
		} else {
			err = d.st.List(d.ctx, f, visit)
		}
		if err != nil && !errors.Is(err, errEnough) {
			return err
		}
		if q.Kind == "" && q.MinAge <= 0 && text == "" {
			p.Matched, p.Exact = p.Listed, true
		} else {
			p.Matched = matched
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// storeMatches is rowMatches on a database row: the kind was selected
// by the listing; the age is AgeSince's, the text in ID, reason or error.
func storeMatches(j *job.Job, q JobQuery, text string) bool {
	if q.MinAge > 0 && q.Now.Sub(AgeSince(j)) < q.MinAge {
		return false
	}
	if text != "" {
		hay := strings.ToLower(j.ID + "\x00" + j.Reason + "\x00" + j.Error)
		if !strings.Contains(hay, text) {
			return false
		}
	}
	return true
}

// storeTail is TailEvents on a database: a pgstore.Feed of the events
// since then, on the pool (it outlives any one request).
func (c *Ctl) storeTail(since time.Duration) (*EventTail, error) {
	if c.pool == nil {
		return nil, errors.New("events tail on a database: open the store's pool first (OpenStorePool)")
	}
	cc := *c
	cc.ctx = nil
	return &EventTail{c: &cc, feed: c.pool.st.Follow(pgstore.FeedFilter{Since: c.now().Add(-since)})}, nil
}

// NextFor is Next, its reading on a database bounded by c's context (a
// request's: c is a copy, WithContext, of the Ctl whose pool the tail
// reads). On a spool it is Next.
func (t *EventTail) NextFor(c *Ctl) ([]job.StreamLine, int, error) {
	if t.feed == nil {
		return t.Next()
	}
	return t.nextFromStore(c)
}

// nextFromStore is Next on a database: the transitions committed since
// the previous call, as stream lines. A failed read changes nothing:
// the next call reads them.
func (t *EventTail) nextFromStore(c *Ctl) ([]job.StreamLine, int, error) {
	if c == nil || c.pool != t.c.pool {
		c = t.c
	}
	_, ctx, done, err := c.pooled()
	if err != nil {
		return nil, 0, err
	}
	defer done()
	evs, err := t.feed.Next(ctx)
	if err != nil {
		return nil, 0, err
	}
	lines := make([]job.StreamLine, 0, len(evs))
	for _, e := range evs {
		lines = append(lines, job.TransitionLine(e.JobID, e.Kind, e.Event))
	}
	return lines, 0, nil
}
