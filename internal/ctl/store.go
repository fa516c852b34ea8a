package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/completion"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// StoreTimeout bounds one farroctl command on a PostgreSQL store
// (connecting included).
const StoreTimeout = 2 * time.Minute

// StoreCommands are the commands that work on a PostgreSQL store as on
// a spool; every other command works on a spool only (SpoolOnly).
var StoreCommands = []string{"submit", "ls", "show", "stats", "history", "migrate", "import", "export", "agents", "top", "events", "pause", "resume", "paused", "serve",
	string(Hold), string(Release), string(Cancel), string(Requeue), string(Kill), string(Retry), string(Remove),
	"fsck", "logs", "metrics", completion.JobIDsCommand}

// storeEquivalents name what to run on a database instead of a
// spool-only command, where there is something.
var storeEquivalents = map[string]string{
	"init": "farroctl migrate creates the schema",
}

// SpoolOnly is the usage error of a command that does not work on a
// PostgreSQL store yet: it names the command and what to use instead.
func SpoolOnly(command string) error {
	msg := fmt.Sprintf("%s works on a spool only for now, not on a PostgreSQL store (--store/FARRO_STORE)", command)
	name, _, _ := strings.Cut(command, " ")
	if eq, ok := storeEquivalents[name]; ok {
		msg += "; on the database: " + eq
	}
	return Usagef("%s", msg)
}

// OnStore reports whether the commands work on a PostgreSQL store
// (Store is a postgres:// URL) rather than on the spool at Root.
func (c *Ctl) OnStore() bool { return store.IsPostgresURL(c.Store) }

// openStore connects to the PostgreSQL store (its pool is opened only
// by the commands that need it) with the command's time limit.
func (c *Ctl) openStore() (store.Store, context.Context, func(), error) {
	if c.pool != nil {
		return c.pooled()
	}
	ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
	st, err := pgstore.Open(ctx, c.Store)
	if err != nil {
		cancel()
		return nil, nil, nil, fmt.Errorf("%s: %s", storeName(c.Store), oneLine(err.Error()))
	}
	return st, ctx, func() { _ = st.Close(); cancel() }, nil
}

// door returns where the job commands find and move jobs: the database,
// or the spool at Root (which must exist; with write, its layout is
// completed). done releases it.
func (c *Ctl) door(write bool) (door, func(), error) {
	if c.OnStore() {
		st, ctx, done, err := c.openStore()
		if err != nil {
			return nil, nil, err
		}
		return &storeDoor{c: c, st: st, ctx: ctx}, done, nil
	}
	open := c.existing
	if write {
		open = c.open
	}
	s, err := open()
	if err != nil {
		return nil, nil, err
	}
	return c.spoolDoor(s), func() {}, nil
}

// readFrom is a command's reading: onStore on a database, else onSpool
// on the spool at Root (which must exist); the printing is the caller's,
// the same for both.
func readFrom[T any](c *Ctl, onStore func() (T, error), onSpool func(*job.Spool) (T, error)) (T, error) {
	if c.OnStore() {
		return onStore()
	}
	s, err := c.existing()
	if err != nil {
		var zero T
		return zero, err
	}
	return onSpool(s)
}

// storeDoor is a PostgreSQL store (pkg/store): farroctl's audit lines
// have no spool-wide stream there; the jobs' own events record the
// actor.
type storeDoor struct {
	c   *Ctl
	st  store.Store
	ctx context.Context
	lim *limits // limits(), once read
}

func (d *storeDoor) locate(id string) (job.Location, error) {
	j, err := d.st.Get(d.ctx, id)
	if err != nil {
		return job.Location{}, err
	}
	return job.Location{State: j.Status, Agent: j.Agent}, nil
}

func (d *storeDoor) read(_ job.Location, id string) (*job.Job, error) { return d.st.Get(d.ctx, id) }

func (d *storeDoor) move(id string, from, to job.State, reason string) (*job.Job, error) {
	return d.st.Move(d.ctx, id, from, to, Actor, reason, nil)
}

func (d *storeDoor) requestControl(_ job.Location, id string, c job.Control) error {
	return d.st.RequestControl(d.ctx, id, c)
}

func (d *storeDoor) retry(id string, succeeded bool) (*job.Job, error) {
	return d.st.Retry(d.ctx, id, Actor, succeeded)
}

func (d *storeDoor) remove(id string) error {
	_, err := d.st.Remove(d.ctx, id, Actor)
	return err
}

// transient: busy (its row locked by another transaction), or moved
// between farroctl's read and its change (the change is conditional on
// the state read).
func (d *storeDoor) transient(err error) bool {
	return errors.Is(err, store.ErrBusy) || errors.Is(err, job.ErrState) || errors.Is(err, job.ErrNotFound)
}

func (d *storeDoor) stuck(_ string, last error) error {
	if errors.Is(last, store.ErrBusy) {
		return fmt.Errorf("busy: other transactions kept changing it (an agent, managerd); try again")
	}
	return fmt.Errorf("kept moving while farroctl acted on it: %v", last)
}

// errEnough stops a listing early.
var errEnough = errors.New("enough")

// resolve: an existing ID is itself; else the IDs that start with arg
// are listed (the listing is in ID order, so they come first after arg).
func (d *storeDoor) resolve(arg string) (string, error) {
	if len(arg) < MinPrefix {
		return arg, nil
	}
	if _, err := d.st.Get(d.ctx, arg); !errors.Is(err, job.ErrNotFound) {
		return arg, nil
	}
	var names []string
	err := d.st.List(d.ctx, store.Filter{AfterID: arg}, func(j *job.Job) error {
		if !strings.HasPrefix(j.ID, arg) {
			return errEnough
		}
		names = append(names, j.ID)
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return "", err
	}
	return matchPrefix(arg, names)
}

func (d *storeDoor) selectJobs(states []job.State, f Filter) ([]string, error) {
	now := d.c.now()
	var ids []string
	for _, st := range states {
		sf := store.Filter{States: []job.State{st}}
		if f.Kind != "" {
			sf.Kinds = []string{f.Kind}
		}
		err := d.st.List(d.ctx, sf, func(j *job.Job) error {
			if f.OlderThan <= 0 || now.Sub(AgeSince(j)) > f.OlderThan {
				ids = append(ids, j.ID)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func (d *storeDoor) submit(reqs []job.SubmitRequest) ([]*job.Job, []error) {
	return d.st.Submit(d.ctx, reqs)
}

// defaultMaxAttempts is the --max-attempts a managerd advertises in the
// agents table, else the default (limits).
func (d *storeDoor) defaultMaxAttempts() int { return d.limits().def }

func (d *storeDoor) audit(job.Audit) {}

// limits are the attempt limits of jobs in the database: managerd's
// advertised --max-attempts (the agents table), as a spool's registry
// says it, else job.DefaultMaxAttempts. Read once per door.
func (d *storeDoor) limits() limits {
	if d.lim == nil {
		d.lim = &limits{def: job.DefaultMaxAttempts, from: LimitFromDefault}
		if pg, ok := d.st.(*pgstore.Store); ok {
			if n, err := pg.AdvertisedMaxAttempts(d.ctx); err == nil && n > 0 {
				d.lim = &limits{def: n, from: LimitFromManagerd}
			}
		}
	}
	return *d.lim
}

// withStore runs fn on the PostgreSQL store.
func (c *Ctl) withStore(fn func(d *storeDoor) error) error {
	dd, done, err := c.door(false)
	if err != nil {
		return err
	}
	defer done()
	return fn(dd.(*storeDoor))
}

// storeRows is ls on a database: the jobs of states (all when empty),
// state by state in lifecycle order, queued ones in claim order.
func (c *Ctl) storeRows(states []job.State) (rows []Row, err error) {
	if len(states) == 0 {
		states = job.States
	}
	err = c.withStore(func(d *storeDoor) error {
		paused := map[string]bool{}
		if pg, ok := d.st.(*pgstore.Store); ok {
			ps, err := pg.PausedKinds(d.ctx)
			if err != nil {
				return err
			}
			for _, p := range ps {
				paused[p.Kind] = true
			}
		}
		for _, st := range states {
			err := d.st.List(d.ctx, store.Filter{States: []job.State{st}}, func(j *job.Job) error {
				r := Row{ID: j.ID, Location: j.Status}
				r.fill(j, d.limits())
				r.KindPaused = j.Status == job.Queued && paused[j.Kind]
				rows = append(rows, r)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	sortQueued(rows)
	return rows, err
}

// storeShow is show on a database: the job's fields, its state and its
// prompt (a database job has no directory, lock or control file).
func (c *Ctl) storeShow(arg string) (doc ShowDoc, err error) {
	err = c.withStore(func(d *storeDoor) error {
		id, err := d.resolve(arg)
		if err != nil {
			return err
		}
		j, err := d.st.Get(d.ctx, id)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		p, err := d.st.Prompt(d.ctx, id)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		doc = ShowDoc{ID: id, Job: j, Location: j.Status, Prompt: p}
		doc.MaxAttemptsApplied, doc.MaxAttemptsFrom = d.limits().of(j)
		return nil
	})
	return doc, err
}

// storeCount is stats on a database: the counts per state, the paused
// kinds, the running jobs per agent and the oldest queued job (one index
// entry: pgstore's OldestQueued, not a read of the queue).
func (c *Ctl) storeCount() (st *Stats, err error) {
	st = &Stats{States: map[job.State]int{}, Agents: map[string]int{}, PausedKinds: []string{}, At: c.now()}
	err = c.withStore(func(d *storeDoor) error {
		pg, err := d.pg()
		if err != nil {
			return err
		}
		counts, err := d.st.Counts(d.ctx)
		if err != nil {
			return err
		}
		for _, s := range job.States {
			st.States[s] = counts[s]
			st.Total += counts[s]
		}
		ps, err := pg.PausedKinds(d.ctx)
		if err != nil {
			return err
		}
		for _, p := range ps {
			st.PausedKinds = append(st.PausedKinds, p.Kind)
		}
		err = d.st.List(d.ctx, store.Filter{States: []job.State{job.InProgress}}, func(j *job.Job) error {
			st.Agents[j.Agent]++
			return nil
		})
		if err != nil {
			return err
		}
		id, created, err := pg.OldestQueued(d.ctx)
		if err != nil {
			return err
		}
		if id != "" {
			age := max(0, seconds(st.At.Sub(created)))
			st.OldestQueuedAge, st.OldestQueuedID = &age, id
		}
		return nil
	})
	return st, err
}

// storeAges is stats --ages on a database: every job, bucketed by the
// time since it entered its state.
func (c *Ctl) storeAges() (map[job.State]*StateAges, error) {
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
	return sh.Ages, err
}

// storeHistory is history's reading on a database: the job's events as
// JSON Lines, as a spool's events.jsonl holds them.
func (c *Ctl) storeHistory(arg string) (data []byte, id string, err error) {
	err = c.withStore(func(d *storeDoor) error {
		if id, err = d.resolve(arg); err != nil {
			return err
		}
		evs, err := d.st.History(d.ctx, id)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		for _, ev := range evs {
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			data = append(append(data, b...), '\n')
		}
		return nil
	})
	return data, id, err
}
