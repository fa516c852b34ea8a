package ctl

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/farro-dev/farro/internal/pause"
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// pg is the door's database as the PostgreSQL store, for what only it
// has (the agents table).
func (d *storeDoor) pg() (*pgstore.Store, error) {
	pg, ok := d.st.(*pgstore.Store)
	if !ok {
		return nil, fmt.Errorf("not a PostgreSQL store")
	}
	return pg, nil
}

// storeAgents is the registry's listing on a database: the agents table,
// with each agent's running jobs (jobs.agent), and the database's clock
// (heartbeats are on it). An agent holding jobs without a row is listed
// with the problem "no record", as on a spool. A daemon's ID is its
// name and host (managerd@HOST): one may run per host.
func (c *Ctl) storeAgents() (l registry.Listing, now time.Time, err error) {
	l = registry.Listing{Agents: []registry.Entry{}, Daemons: []registry.Entry{}}
	err = c.withStore(func(d *storeDoor) error {
		pg, err := d.pg()
		if err != nil {
			return err
		}
		rows, dbNow, err := pg.Agents(d.ctx)
		if err != nil {
			return err
		}
		now = dbNow
		for _, r := range rows {
			e := registry.Entry{Record: registry.Record{ID: r.ID, PID: r.PID, Host: r.Host, Version: r.Version,
				StartedAt: r.StartedAt, LastSeen: r.HeartbeatAt, StoppedAt: r.StoppedAt, MaxAttempts: r.MaxAttempts},
				Live: r.Live, JobsHeld: r.Running}
			if r.Unregistered {
				e.Problem = "no record"
			}
			if r.Kind == pgstore.KindAgentd {
				e.Kind, e.Actor, e.Slots, e.Kinds = registry.KindAgent, "agentd/"+r.ID, r.Concurrency, r.Kinds
				l.Agents = append(l.Agents, e)
				continue
			}
			e.Kind, e.ID, e.Actor = registry.KindDaemon, r.Kind+"@"+r.ID, r.Kind
			l.Daemons = append(l.Daemons, e)
		}
		return nil
	})
	return l, now, err
}

// storeTopDoc is one snapshot of top on a database: the counts, the
// oldest queued job (one index entry: pgstore's OldestQueued) and the
// running jobs from the jobs table, who runs them from the agents table;
// the rendering is the spool's. Without queue, only the running jobs and
// the agents are read (the dashboard's workers, as a spool's WorkersOf
// reads in-progress/ only): no counts, no oldest queued job.
func (c *Ctl) storeTopDoc(d *storeDoor, queue bool) (TopDoc, error) {
	snap := spoolview.Snapshot{States: map[job.State]int{}, Agents: map[string]int{}, Ready: true}
	var (
		running []*job.Job
		reg     registry.Listing
	)
	err := func() error {
		pg, err := d.pg()
		if err != nil {
			return err
		}
		rows, now, err := pg.Agents(d.ctx)
		if err != nil {
			return err
		}
		snap.At = now
		for _, r := range rows {
			if r.Unregistered {
				continue
			}
			e := registry.Entry{Record: registry.Record{ID: r.ID, Slots: r.Concurrency}, Live: r.Live}
			if r.Kind == pgstore.KindAgentd {
				reg.Agents = append(reg.Agents, e)
			} else {
				e.ID = r.Kind
				reg.Daemons = append(reg.Daemons, e)
			}
		}
		err = d.st.List(d.ctx, store.Filter{States: []job.State{job.InProgress}}, func(j *job.Job) error {
			running = append(running, j)
			snap.Agents[j.Agent]++
			snap.Running = append(snap.Running, spoolview.RunningJob{Agent: j.Agent, ID: j.ID})
			return nil
		})
		if err != nil || !queue {
			return err
		}
		counts, err := d.st.Counts(d.ctx)
		if err != nil {
			return err
		}
		for _, s := range job.States {
			snap.States[s] = counts[s]
		}
		_, snap.OldestQueued, err = pg.OldestQueued(d.ctx)
		return err
	}()
	if err != nil {
		return TopDoc{}, err
	}
	// A live daemon of any host counts as live.
	sort.SliceStable(reg.Daemons, func(i, j int) bool { return !reg.Daemons[i].Live && reg.Daemons[j].Live })
	byID := map[string]*job.Job{}
	for _, j := range running {
		byID[j.ID] = j
	}
	return buildTop(storeName(c.Store), snap, nil, reg, func(agent, id string) (*job.Job, error) {
		if j := byID[id]; j != nil {
			return j, nil
		}
		return nil, job.ErrNotFound
	}), nil
}

// topStore is top on a database: one snapshot (JSON, --once, not a
// terminal), or the live view redrawn from a new snapshot every
// Interval, on one connection pool.
func (c *Ctl) topStore(o TopOptions) error {
	return c.withStore(func(d *storeDoor) error {
		out, tty := c.Stdout.(*os.File)
		tty = tty && term.IsTerminal(int(out.Fd()))
		if o.JSON || o.Once || !tty {
			doc, err := c.storeTopDoc(d, true)
			if err != nil {
				return err
			}
			if o.JSON {
				return json.NewEncoder(c.Stdout).Encode(doc)
			}
			_, err = io.WriteString(c.Stdout, strings.Join(renderTop(doc, "", 0), "\n")+"\n")
			return err
		}
		// The live view runs until q: no two-minute bound.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		d.ctx = ctx
		return c.topLive(out, o, nil, func(header string, w int) []string {
			qctx, qcancel := context.WithTimeout(ctx, StoreTimeout)
			defer qcancel()
			d.ctx = qctx
			doc, err := c.storeTopDoc(d, true)
			if err != nil {
				return []string{"farro top · " + storeName(c.Store), "", oneLine(err.Error())}
			}
			return renderTop(doc, header, w)
		})
	})
}

// storeEvents is events on a database: the transitions of job_events
// (oldest first; with Follow, each new one once, as it commits: see
// pgstore.Feed) printed as the spool's stream prints them. The database
// has no operator lines or removal lines: its jobs' histories record the
// actions (actor farroctl), and a removed job's history goes with it.
func (c *Ctl) storeEvents(ctx context.Context, o EventsOptions, emit func([]byte, *job.StreamLine) error, out *bufio.Writer) error {
	st, _, done, err := c.openStore()
	if err != nil {
		return err
	}
	defer done()
	pg, ok := st.(*pgstore.Store)
	if !ok {
		return fmt.Errorf("not a PostgreSQL store")
	}
	f := pgstore.FeedFilter{Job: o.Job}
	if o.Since > 0 {
		f.Since = c.now().Add(-o.Since)
	}
	show := func(evs []pgstore.FeedEvent) error {
		for _, e := range evs {
			l := job.TransitionLine(e.JobID, e.Kind, e.Event)
			b, err := json.Marshal(l)
			if err != nil {
				return err
			}
			if err := emit(b, &l); err != nil {
				return err
			}
		}
		return out.Flush()
	}
	// Each read is bounded as a command is; Follow runs until ctx ends.
	read := func(fn func(context.Context) ([]pgstore.FeedEvent, error)) ([]pgstore.FeedEvent, error) {
		rctx, cancel := context.WithTimeout(ctx, StoreTimeout)
		defer cancel()
		return fn(rctx)
	}
	if !o.Follow {
		evs, err := read(func(ctx context.Context) ([]pgstore.FeedEvent, error) { return pg.Events(ctx, f) })
		if err != nil {
			return err
		}
		return show(evs)
	}
	fd := pg.Follow(f)
	for {
		evs, err := read(fd.Next)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := show(evs); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Poll):
		}
	}
}

// storePause is pause on a database: a row of paused_kinds, which the
// claim statement consults. It returns the start of a pause that was
// already there.
func (c *Ctl) storePause(e pause.Entry) (since *time.Time, err error) {
	err = c.withStore(func(d *storeDoor) error {
		pg, err := d.pg()
		if err != nil {
			return err
		}
		since, err = pg.PauseKind(d.ctx, pgstore.PausedKind{Kind: e.Kind, By: e.Actor, User: e.User, Host: e.Host, PID: e.PID, Reason: e.Reason})
		return err
	})
	return since, err
}

// storeResume is resume on a database.
func (c *Ctl) storeResume(kind string) (was bool, err error) {
	err = c.withStore(func(d *storeDoor) error {
		pg, err := d.pg()
		if err != nil {
			return err
		}
		was, err = pg.ResumeKind(d.ctx, kind)
		return err
	})
	return was, err
}

// storePaused is paused on a database (nothing is ever ignored there).
func (c *Ctl) storePaused() (doc PausedDoc, err error) {
	doc = PausedDoc{Paused: []pause.Listed{}, Ignored: []pause.Ignored{}}
	err = c.withStore(func(d *storeDoor) error {
		pg, err := d.pg()
		if err != nil {
			return err
		}
		ps, err := pg.PausedKinds(d.ctx)
		for _, p := range ps {
			doc.Paused = append(doc.Paused, pause.Listed{Kind: p.Kind, Entry: &pause.Entry{Kind: p.Kind, PausedAt: p.PausedAt,
				Actor: p.By, User: p.User, Host: p.Host, PID: p.PID, Reason: p.Reason}})
		}
		return err
	})
	return doc, err
}
