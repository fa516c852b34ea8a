// Package spoolstore is the spool behind the store seam: a store.Store
// over a job.Spool, a directory tree on one host. pkg/job keeps the
// spool's transactions (submit, claim, commit, move, recovery); this
// package adapts them to the seam and adds nothing to what is on disk.
// With WithIndex its claims come from a bounded index of incoming/ fed by
// a watch of the directory (agentd's claims: see indexed.go); without,
// each Claim lists incoming/. Beside the seam, engine.go is the spool's
// own door for managerd's event-driven engine (internal/manager), which
// reaches jobs through nothing else.
//
// Errors are pkg/job's; a busy lock (fsq.ErrLocked) is also
// store.ErrBusy (errors.Is holds for both).
package spoolstore

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// DefaultLockGrace is how old a lock without a readable owner file, or
// an in-progress job without a lock, must be before Recover takes it for
// abandoned (watchdogd's --lock-grace default).
const DefaultLockGrace = 5 * time.Second

// Actor names the store in the owner files of the locks it takes only
// to read (Get, when a job is seen in two places while it moves).
const Actor = "store"

// Store is the spool store. Its methods are safe for concurrent use, by
// several processes too: every transaction is pkg/job's, under the job's
// lock.
type Store struct {
	sp        *job.Spool
	lockGrace time.Duration
	ix        *indexed // WithIndex: the claims' index of incoming/
}

var _ store.Store = (*Store)(nil)

type config struct {
	spoolOpts []job.Option
	lockGrace time.Duration
	index     *IndexConfig
}

// Option configures Open.
type Option func(*config)

// WithSpoolOptions passes options to job.Open (job.Existing, say).
func WithSpoolOptions(opts ...job.Option) Option {
	return func(c *config) { c.spoolOpts = append(c.spoolOpts, opts...) }
}

// WithLockGrace sets the age past which Recover takes a lock without a
// readable owner file, or an in-progress job without a lock, for
// abandoned (default DefaultLockGrace).
func WithLockGrace(d time.Duration) Option { return func(c *config) { c.lockGrace = d } }

// Open returns the store of the spool at root (job.Open: the layout is
// made when missing, unless job.Existing is passed).
func Open(root string, opts ...Option) (*Store, error) {
	c := config{lockGrace: DefaultLockGrace}
	for _, o := range opts {
		o(&c)
	}
	sp, err := job.Open(root, c.spoolOpts...)
	if err != nil {
		return nil, err
	}
	return newStore(sp, c), nil
}

// New returns the store of a spool already open (a daemon's, opened with
// its own options: WithSpoolOptions is ignored, no second layout check);
// agentd's is made with WithIndex.
func New(sp *job.Spool, opts ...Option) *Store {
	c := config{lockGrace: DefaultLockGrace}
	for _, o := range opts {
		o(&c)
	}
	return newStore(sp, c)
}

func newStore(sp *job.Spool, c config) *Store {
	s := &Store{sp: sp, lockGrace: c.lockGrace}
	if c.index != nil {
		s.ix = newIndexed(sp, *c.index)
	}
	return s
}

// Spool returns the spool behind the store, for what the seam does not
// carry (the files a daemon keeps beside the jobs: paused/, its agent
// directory, the priority hints of ended jobs).
func (s *Store) Spool() *job.Spool { return s.sp }

// Close stops an indexed store's watch of incoming/ (its Claim fails
// afterwards); a spool holds no connection.
func (s *Store) Close() error {
	if s.ix != nil {
		s.ix.close()
	}
	return nil
}

// busy makes a busy lock store.ErrBusy as well.
func busy(err error) error {
	if err != nil && errors.Is(err, fsq.ErrLocked) && !errors.Is(err, store.ErrBusy) {
		return fmt.Errorf("%w: %w", store.ErrBusy, err)
	}
	return err
}

// Submit is job.Spool.SubmitMany (reqs is not modified): the whole batch
// is made durable with two barriers, however many jobs it holds. A job
// whose lock was busy is also store.ErrBusy.
func (s *Store) Submit(ctx context.Context, reqs []job.SubmitRequest) ([]*job.Job, []error) {
	if err := ctx.Err(); err != nil {
		errs := make([]error, len(reqs))
		for i := range errs {
			errs[i] = err
		}
		return make([]*job.Job, len(reqs)), errs
	}
	jobs, errs := s.sp.SubmitMany(slices.Clone(reqs))
	for i := range errs {
		errs[i] = busy(errs[i])
	}
	return jobs, errs
}

// lcand is a claimable job as the listing Claim orders it.
type lcand struct {
	id   string
	prio int
	age  time.Time
	read bool   // prio and age come from job.json (else: from the hint and the ID)
	kind string // once read
}

func (a *lcand) before(b *lcand) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if !a.age.Equal(b.age) {
		return a.age.Before(b.age)
	}
	return a.id < b.id
}

type lcandHeap []lcand

func (h lcandHeap) Len() int           { return len(h) }
func (h lcandHeap) Less(i, j int) bool { return h[i].before(&h[j]) }
func (h lcandHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lcandHeap) Push(x any)        { *h = append(*h, x.(lcand)) }
func (h *lcandHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// ageOf is the age key of a job: the time its ID carries, or its
// created_at.
func ageOf(j *job.Job) time.Time {
	if t, ok := job.IDTime(j.ID); ok {
		return t
	}
	return j.CreatedAt
}

// candidates lists incoming/ and the priority hints, as agentd's index
// learns them: a job's priority from its hint (none: 0), its age from its
// ID. An ID that carries no time is read at once. Both estimates are
// never worse than the job.json they stand for (a hint is written with
// its job), so Claim reads each candidate's job.json before it takes it
// and puts it back when it turns out worse than the next one.
func (s *Store) candidates(ctx context.Context) (lcandHeap, error) {
	hints := map[string]int{}
	if err := s.sp.ScanHints(func(prio int, id string) { hints[id] = prio }); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("claim: priority hints: %w", err)
	}
	var h lcandHeap
	err := fsq.ScanDirFunc(s.sp.StateDir(job.Queued), func(name string, isDir bool) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !isDir || job.ValidateID(name) != nil {
			return nil // a lock (<id>.lock is no job name), or something planted
		}
		c := lcand{id: name, prio: hints[name]}
		if t, ok := job.IDTime(name); ok {
			c.age = t
		} else if !s.readCand(&c) {
			return nil
		}
		h = append(h, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	heap.Init(&h)
	return h, nil
}

// readCand reads c's job.json in incoming/: false when it is gone or not
// queued there. An unreadable one stays a candidate: the claim
// quarantines it.
func (s *Store) readCand(c *lcand) bool {
	j, err := job.ReadJob(s.sp.JobDir(job.Queued, "", c.id))
	switch {
	case errors.Is(err, fsq.ErrVanished):
		return false
	case err != nil:
		c.read = true
		return true
	case j.Status != job.Queued:
		return false
	}
	c.prio, c.age, c.kind, c.read = j.Priority, ageOf(j), j.Kind, true
	return true
}

// Claim takes up to opts.Max jobs of incoming/, best first, with
// job.Spool.Claim. Without an index its cost is a listing of incoming/
// and of the priority hints per call, plus one read of job.json per
// candidate tried; an indexed store (WithIndex) takes its candidates from
// its index instead, and claims several concurrently (see indexed.go). A
// job someone else took meanwhile (its lock is busy) or one an operator's
// request was applied to (job.ErrControlled) is passed over; so are jobs
// gone, not queued, or of an unknown schema.
func (s *Store) Claim(ctx context.Context, h job.Holder, opts store.ClaimOptions) ([]store.Claim, error) {
	if s.ix != nil {
		return s.ix.claim(ctx, h, opts)
	}
	want := max(opts.Max, 1)
	cands, err := s.candidates(ctx)
	if err != nil {
		return nil, err
	}
	var out []store.Claim
	for len(out) < want && cands.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		c := heap.Pop(&cands).(lcand)
		if !c.read {
			if !s.readCand(&c) {
				continue
			}
			if cands.Len() > 0 && cands[0].before(&c) {
				heap.Push(&cands, c) // worse than its estimate: in its place
				continue
			}
		}
		if len(opts.Kinds) > 0 && !slices.Contains(opts.Kinds, c.kind) {
			if c.kind != "" && opts.PassedOver != nil {
				opts.PassedOver(c.kind, c.id)
			}
			continue // of another kind, or unreadable (a claim of any kind quarantines it)
		}
		cl, err := s.sp.Claim(c.id, h)
		switch {
		case err == nil:
		case errors.Is(err, fsq.ErrLocked), errors.Is(err, job.ErrControlled), errors.Is(err, fsq.ErrVanished),
			errors.Is(err, job.ErrState), errors.Is(err, job.ErrSchema), errors.Is(err, job.ErrCorrupt):
			continue
		default:
			return out, busy(err)
		}
		out = append(out, &claim{c: cl})
	}
	return out, nil
}

// claim is a store.Claim over a job.Claimed.
type claim struct{ c *job.Claimed }

func (c *claim) Job() *job.Job           { return c.c.Envelope().Lifecycle }
func (c *claim) Prompt() json.RawMessage { return c.c.Envelope().Prompt }
func (c *claim) Token() string           { return c.c.Token() }
func (c *claim) Dir() string             { return c.c.Envelope().Runtime.Dir }

func (c *claim) Heartbeat(ctx context.Context) error { return c.lost(c.c.Heartbeat()) }

func (c *claim) PendingControl(ctx context.Context) (*job.Control, error) {
	return c.c.PendingControl()
}

func (c *claim) RecordHandler(ctx context.Context, id proc.Identity) error {
	return c.lost(c.c.RecordHandler(id))
}

func (c *claim) Fence(ctx context.Context) error { return c.c.Fence() }

func (c *claim) Commit(ctx context.Context, to job.State, reason string, mutate func(*job.Job)) error {
	return c.lost(c.c.Commit(to, reason, mutate))
}

// Envelope is the claimed job's envelope (job.Claimed.Envelope): its
// runtime names the job's directory and its lock on this host.
func (c *claim) Envelope() job.Envelope { return c.c.Envelope() }

// DropControl removes the operator's request from the job's directory
// once it is being fulfilled (job.Claimed.DropControl).
func (c *claim) DropControl() error { return c.c.DropControl() }

// lost makes an error of a claim that was taken away say so: a write
// that failed on the way (its directory gone, say) before the fence
// could tell is checked against the fence.
func (c *claim) lost(err error) error {
	if err == nil || store.Lost(err) || errors.Is(err, job.ErrIllegal) {
		return err
	}
	if ferr := c.c.Fence(); store.Lost(ferr) {
		return fmt.Errorf("%w (%v)", ferr, err)
	}
	return err
}

// locate finds job id in one place (job.Spool.LocateSettled).
func (s *Store) locate(id string) (job.Location, error) {
	locs, err := s.sp.LocateSettled(id, Actor)
	if err != nil {
		return job.Location{}, err
	}
	if len(locs) > 1 {
		return job.Location{}, fmt.Errorf("%s: found in %d places (run farroctl fsck)", id, len(locs))
	}
	return locs[0], nil
}

// tries bounds how often a read follows a job that moved while it was
// read.
const tries = 5

// Get reads job id's job.json wherever it is.
func (s *Store) Get(ctx context.Context, id string) (*job.Job, error) {
	var err error
	for range tries {
		var loc job.Location
		if loc, err = s.locate(id); err != nil {
			return nil, err
		}
		var j *job.Job
		if j, err = job.ReadJob(loc.Dir); err == nil || !errors.Is(err, fsq.ErrVanished) {
			return j, err
		}
	}
	return nil, err
}

// Prompt reads job id's prompt.json wherever it is.
func (s *Store) Prompt(ctx context.Context, id string) (json.RawMessage, error) {
	var err error
	for range tries {
		var loc job.Location
		if loc, err = s.locate(id); err != nil {
			return nil, err
		}
		var p json.RawMessage
		if p, err = job.ReadPrompt(loc.Dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return p, err
		}
	}
	return nil, err
}

// History reads job id's events.jsonl (job.ReadEvents); torn lines are
// left out.
func (s *Store) History(ctx context.Context, id string) ([]job.Event, error) {
	var err error
	for range tries {
		var loc job.Location
		if loc, err = s.locate(id); err != nil {
			return nil, err
		}
		var evs []job.Event
		if evs, _, err = job.ReadEvents(loc.Dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
			if err != nil {
				err = fmt.Errorf("history %s: %w", id, err)
			}
			return evs, err
		}
	}
	return nil, err
}

// listed is where a listing saw a job.
type listed struct {
	state job.State
	agent string
}

// scanState calls fn with every job name of st's directory (for
// in-progress, of every agent's), through the safe scanners: dot files,
// symlinks, locks and anything planted that is no directory are left
// out.
func (s *Store) scanState(ctx context.Context, st job.State, fn func(id, agent string)) error {
	scan := func(dir, agent string) error {
		return fsq.ScanDirFunc(dir, func(name string, isDir bool) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if isDir && job.ValidateID(name) == nil {
				fn(name, agent)
			}
			return nil
		})
	}
	if st != job.InProgress {
		return scan(s.sp.StateDir(st), "")
	}
	var agents []string
	if err := fsq.ScanDirFunc(s.sp.StateDir(job.InProgress), func(name string, isDir bool) error {
		if isDir && job.ValidateID(name) == nil {
			agents = append(agents, name)
		}
		return nil
	}); err != nil {
		return err
	}
	for _, a := range agents {
		if err := scan(s.sp.AgentDir(a), a); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// List lists the directories of the states f selects, then reads the
// job.json of each job (in ID order) that is past f.AfterID. A job whose
// job.json cannot be read (corrupt, hostile, gone meanwhile) is left out,
// not an error. A job seen in two directories (it moved during the
// listing) is read once, from where it is when it is read. ByFinished
// reads every job.json the states hold, as the ID order does, and keeps
// the first f.Limit in finishing order.
func (s *Store) List(ctx context.Context, f store.Filter, fn func(*job.Job) error) error {
	if err := f.Check(); err != nil {
		return err
	}
	if f.ByFinished {
		return s.listByFinished(ctx, f, fn)
	}
	states := f.States
	if len(states) == 0 {
		states = job.States
	}
	where := map[string]listed{}
	for _, st := range states {
		if !st.Valid() {
			return fmt.Errorf("list: unknown state %q", st)
		}
		err := s.scanState(ctx, st, func(id, agent string) {
			if f.AfterID != "" && id <= f.AfterID {
				return
			}
			if _, seen := where[id]; !seen {
				where[id] = listed{st, agent}
			}
		})
		if err != nil {
			return fmt.Errorf("list %s: %w", st.Dir(), err)
		}
	}
	ids := make([]string, 0, len(where))
	for id := range where {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	n := 0
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		l := where[id]
		j, err := job.ReadJob(s.sp.JobDir(l.state, l.agent, id))
		if errors.Is(err, fsq.ErrVanished) {
			// Moved since the listing: read where it is now, if that
			// is a state the filter selects.
			var loc job.Location
			if loc, err = s.locate(id); err == nil && slices.Contains(states, loc.State) {
				j, err = job.ReadJob(loc.Dir)
			} else if err == nil {
				continue
			}
		}
		if err != nil || !match(j, f) {
			continue
		}
		if err := fn(j); err != nil {
			return err
		}
		if n++; f.Limit > 0 && n >= f.Limit {
			return nil
		}
	}
	return nil
}

// listByFinished is List in finishing order: the matching jobs are
// gathered (at most twice f.Limit kept at a time), sorted, and given to
// fn once the listing is done.
func (s *Store) listByFinished(ctx context.Context, f store.Filter, fn func(*job.Job) error) error {
	var keep []*job.Job
	trim := func(n int) {
		slices.SortFunc(keep, store.FinishedOrder)
		if n > 0 && len(keep) > n {
			keep = keep[:n]
		}
	}
	all := f
	all.ByFinished, all.Limit = false, 0
	err := s.List(ctx, all, func(j *job.Job) error {
		if keep = append(keep, j); f.Limit > 0 && len(keep) >= 2*f.Limit {
			trim(f.Limit)
		}
		return nil
	})
	if err != nil {
		return err
	}
	trim(f.Limit)
	for _, j := range keep {
		if err := fn(j); err != nil {
			return err
		}
	}
	return nil
}

// match applies the filters that need job.json.
func match(j *job.Job, f store.Filter) bool {
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, j.Kind) {
		return false
	}
	if !f.FinishedBefore.IsZero() && !j.Finished().Before(f.FinishedBefore) {
		return false
	}
	if !f.DueBy.IsZero() && (j.NotBefore == nil || j.NotBefore.After(f.DueBy)) {
		return false
	}
	return true
}

// Counts counts the jobs of each state by listing its directory (no
// job.json is read).
func (s *Store) Counts(ctx context.Context) (map[job.State]int, error) {
	n := make(map[job.State]int, len(job.States))
	for _, st := range job.States {
		if err := s.scanState(ctx, st, func(string, string) { n[st]++ }); err != nil {
			return nil, fmt.Errorf("counts %s: %w", st.Dir(), err)
		}
	}
	return n, nil
}

// whereIs says where job id is, for an error of a transaction that did
// not find it where it looked.
func (s *Store) whereIs(op, id string, err error) error {
	loc, lerr := s.locate(id)
	if lerr != nil {
		return lerr
	}
	return fmt.Errorf("%s %s: %w: it is %s (%v)", op, id, job.ErrState, loc.State, err)
}

// Move is job.Spool.Move; a job not in from is job.ErrState.
func (s *Store) Move(ctx context.Context, id string, from, to job.State, actor, reason string, mutate func(*job.Job) error) (*job.Job, error) {
	if from == job.InProgress || to == job.InProgress {
		return nil, fmt.Errorf("move %s: %w: %s -> %s (in-progress jobs move only by their claim or by recovery)", id, job.ErrIllegal, from, to)
	}
	j, err := s.sp.Move(id, from, to, actor, reason, mutate)
	if errors.Is(err, fsq.ErrVanished) {
		return nil, s.whereIs("move", id, err)
	}
	return j, busy(err)
}

// RequestControl writes the request into the running job's directory
// (job.Spool.RequestControl); its agent applies it.
func (s *Store) RequestControl(ctx context.Context, id string, c job.Control) error {
	var err error
	for range tries {
		var loc job.Location
		if loc, err = s.locate(id); err != nil {
			return err
		}
		if loc.State != job.InProgress {
			return fmt.Errorf("control %s: %w: it is %s, not running", id, job.ErrState, loc.State)
		}
		if err = s.sp.RequestControl(loc.Agent, id, c); !errors.Is(err, fsq.ErrVanished) {
			return err
		}
		time.Sleep(time.Millisecond) // its agent is committing it: look again
	}
	return fmt.Errorf("control %s: %w: the job is finishing (%v)", id, job.ErrState, err)
}

// Retry is job.Spool.Retry.
func (s *Store) Retry(ctx context.Context, id, actor string, includeSucceeded bool) (*job.Job, error) {
	j, err := s.sp.Retry(id, actor, includeSucceeded)
	return j, busy(err)
}

// Remove is job.Spool.Remove.
func (s *Store) Remove(ctx context.Context, id, actor string) (*job.Job, error) {
	j, err := s.sp.Remove(id, actor)
	return j, busy(err)
}

// Expire is job.Spool.Expire.
func (s *Store) Expire(ctx context.Context, id, actor string, cutoff time.Time) (*job.Job, error) {
	j, err := s.sp.Expire(id, actor, cutoff)
	return j, busy(err)
}

// Recover is one pass of what watchdogd does, without its memory
// between passes: every claim lock of incoming/ is judged
// (job.JudgeHolder: dead owner, or no readable owner file for the lock
// grace), and a live agent is judged silent when its claim's
// last_heartbeat in job.json is older than opts.SilentAfter plus
// opts.Grace (by the wall clock: watchdogd measures silence on its own
// clock instead, between its passes). A condemned holder's executions
// are stopped first (job.Spool.StopExecutions); its job is recovered
// only once they are gone (job.Spool.RecoverJudgedLock), and only while
// the lock still holds what was judged. Then every in-progress job
// without a lock, older than the lock grace, is reconciled
// (job.Spool.Reconcile). Locks of others than agents (a mover's, an
// operator's) are judged dead or alive only, never silent. Errors of
// single jobs are joined; the pass goes on.
func (s *Store) Recover(ctx context.Context, opts store.RecoverOptions) ([]job.Outcome, error) {
	actor := opts.Actor
	if actor == "" {
		actor = "recovery"
	}
	var locks, hostile []string
	err := fsq.ScanDirFunc(s.sp.StateDir(job.Queued), func(name string, isDir bool) error {
		id, ok := strings.CutSuffix(name, job.LockSuffix)
		if !ok || job.ValidateID(id) != nil {
			return nil
		}
		if isDir {
			locks = append(locks, id)
		} else {
			hostile = append(hostile, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	var outs []job.Outcome
	var errs []error
	for _, id := range hostile {
		// No holder ever makes a lock that is not a directory.
		lock := s.sp.LockPath(id)
		if _, err := s.sp.Quarantine(lock, "not a directory where a claim lock must be"); err != nil && !errors.Is(err, fsq.ErrVanished) {
			errs = append(errs, fmt.Errorf("recover %s: %w", id, err))
			continue
		}
		outs = append(outs, job.Outcome{ID: id, Action: "quarantined", Detail: "hostile lock"})
	}
	for _, id := range locks {
		if err := ctx.Err(); err != nil {
			return outs, err
		}
		out, ok, err := s.recoverLock(id, actor, opts)
		if err != nil && !errors.Is(err, fsq.ErrLocked) && !errors.Is(err, fsq.ErrVanished) {
			errs = append(errs, err)
		}
		if ok && err == nil {
			outs = append(outs, out)
		}
	}
	err = s.scanState(ctx, job.InProgress, func(id, agent string) {
		if _, err := os.Lstat(s.sp.LockPath(id)); !errors.Is(err, fs.ErrNotExist) {
			return // locked (judged above), or unknown
		}
		fi, err := os.Lstat(s.sp.JobDir(job.InProgress, agent, id))
		if err != nil || time.Since(fi.ModTime()) < s.lockGrace {
			return // a claim or a recovery may be under way
		}
		out, err := s.sp.Reconcile(id, actor, fmt.Sprintf("owner died: in-progress job has no lock (agent %s)", agent))
		switch {
		case err == nil:
			outs = append(outs, out)
		case !errors.Is(err, fsq.ErrLocked):
			errs = append(errs, err)
		}
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("recover: %w", err))
	}
	return outs, errors.Join(errs...)
}

// recoverLock judges the holder of job id's lock and recovers the job
// when it is dead or silent; ok is false when it was left alone.
func (s *Store) recoverLock(id, actor string, opts store.RecoverOptions) (job.Outcome, bool, error) {
	lock := s.sp.LockPath(id)
	fi, err := os.Lstat(lock)
	if err != nil {
		return job.Outcome{}, false, nil // gone meanwhile
	}
	h := job.ReadLockHolder(lock)
	judged := job.JudgeHolder(h, time.Since(fi.ModTime()), s.lockGrace)
	reason := judged.Reason
	switch {
	case judged.Dead:
	case judged.Live && opts.SilentAfter > 0 && job.ValidateID(h.Owner.Agent) == nil:
		j, err := job.ReadJob(s.sp.JobDir(job.InProgress, h.Owner.Agent, id))
		if err != nil || j.Status != job.InProgress {
			return job.Outcome{}, false, nil // not there (moving), or no claim of its: left to watchdogd
		}
		last := j.UpdatedAt
		if j.LastHeartbeat != nil {
			last = *j.LastHeartbeat
		}
		silence := time.Since(last)
		if silence <= opts.SilentAfter+opts.Grace {
			return job.Outcome{}, false, nil
		}
		reason = job.SilentReason(h, silence)
	default:
		return job.Outcome{}, false, nil
	}
	if ex := s.sp.StopExecutions(id, lock); ex.Waiting {
		return job.Outcome{}, false, fmt.Errorf("recover %s: an execution still runs (killed %v), recovery waits for the next pass: %v", id, ex.Killed, ex.Err)
	}
	if !h.Unchanged(lock) {
		return job.Outcome{}, false, nil // changed hands while it was judged
	}
	out, err := s.sp.RecoverJudgedLock(id, actor, reason, h.Judged())
	return out, true, err
}
