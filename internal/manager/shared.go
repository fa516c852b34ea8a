package manager

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/metrics"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// managerd on a shared store (PostgreSQL). The policy is the spool's —
// stalePlan, failedPlan, backoff with full jitter, retryReason — applied
// through the store's Move; deferred jobs are promoted by a listing of
// those due (Filter.DueBy), and retention removes through Expire what a
// listing of terminal jobs finished before the cutoff returns
// (Filter.FinishedBefore), the first finished first (Filter.ByFinished:
// a database reads the due jobs only, from an index on the finishing
// time). Every listing is one page (Filter.Limit); the policy's pages go
// on after the last ID they saw (Filter.AfterID) at the next pass, and
// retention's start at the first finished again (it removed what it
// listed, and what it could not remove is tried again first), so a pass
// costs at most a page per state, never the whole table. The
// crawl frontier, the tmp/ sweep and the event stream's segments are the
// spool's: they do not run here.

// SharedEvery is the period of the passes on a shared store.
const SharedEvery = 500 * time.Millisecond

// sharedPage is how many jobs of one state a pass lists at most.
const sharedPage = 500

// Shared runs the policy over a store.
type Shared struct {
	st     store.Store
	pol    *Manager // the policy's functions (its config); no spool
	log    zerolog.Logger
	after  map[job.State]string // each state's page cursor
	limit  int                  // a page's size: sharedPage (tests: less)
	retain time.Time            // the last retention pass
}

// NewShared returns a manager for store st.
func NewShared(st store.Store, cfg Config, log zerolog.Logger) *Shared {
	cfg.defaults()
	return &Shared{st: st, pol: &Manager{cfg: cfg, log: log}, log: log, after: map[job.State]string{}, limit: sharedPage}
}

// Run makes a pass every SharedEvery until ctx is done; cfg.Ready is
// called after the first.
func (s *Shared) Run(ctx context.Context) error {
	t := time.NewTicker(SharedEvery)
	defer t.Stop()
	for {
		s.Pass(ctx)
		if r := s.pol.cfg.Ready; r != nil {
			s.pol.cfg.Ready = nil
			r()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass is one pass: stale and failed jobs through the policy, due
// deferred jobs promoted, and (every RetentionEvery) retention.
func (s *Shared) Pass(ctx context.Context) {
	s.page(ctx, store.Filter{States: []job.State{job.Stale}}, s.stale)
	s.page(ctx, store.Filter{States: []job.State{job.Failed}}, s.failed)
	s.page(ctx, store.Filter{States: []job.State{job.Deferred}, DueBy: time.Now()}, s.promote)
	if cfg := s.pol.cfg; cfg.Retention > 0 && time.Since(s.retain) >= cfg.RetentionEvery {
		s.retain = time.Now()
		s.retention(ctx, time.Now().Add(-cfg.Retention))
	}
}

// page lists the next page of f's one state after its cursor and calls
// do for each job; the cursor goes back to the start after a short page.
// A listing ByFinished has no cursor: each starts at the first finished.
func (s *Shared) page(ctx context.Context, f store.Filter, do func(context.Context, *job.Job) error) int {
	st := f.States[0]
	f.Limit = s.limit
	if !f.ByFinished {
		f.AfterID = s.after[st]
	}
	var jobs []*job.Job
	err := s.st.List(ctx, f, func(j *job.Job) error { jobs = append(jobs, j); return nil })
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error().Err(err).Str("state", string(st)).Msg("cannot list jobs; retrying at the next pass")
		}
		return 0
	}
	if !f.ByFinished {
		s.after[st] = ""
		if len(jobs) == s.limit {
			s.after[st] = jobs[len(jobs)-1].ID
		}
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			return 0
		}
		if err := do(ctx, j); err != nil {
			s.report(j, err)
		}
	}
	return len(jobs)
}

// report logs a job the pass could not act on: someone else changed it
// meanwhile (retried at a next pass), or a real error.
func (s *Shared) report(j *job.Job, err error) {
	l := s.log.With().Str("job_id", j.ID).Str("state", string(j.Status)).Logger()
	switch {
	case errors.Is(err, store.ErrBusy), errors.Is(err, job.ErrState), errors.Is(err, errChanged),
		errors.Is(err, job.ErrNotFound), errors.Is(err, job.ErrNotExpired), errors.Is(err, job.ErrControlled):
		l.Debug().Err(err).Msg("job changed meanwhile; left to the next pass")
	default:
		l.Error().Err(err).Msg("policy failed on the job; retrying at the next pass")
	}
}

func (s *Shared) moved(nj *job.Job, from job.State) {
	logx.Transition(s.log, nj, from)
	counted(from, nj.Status)
}

// stale is handleStale on the store.
func (s *Shared) stale(ctx context.Context, j *job.Job) error {
	to, reason, mutate := s.pol.staleStep(j)
	nj, err := s.st.Move(ctx, j.ID, job.Stale, to, Actor, reason, mutate)
	if err != nil {
		return err
	}
	s.moved(nj, job.Stale)
	return nil
}

// failed is handleFailed on the store.
func (s *Shared) failed(ctx context.Context, j *job.Job) error {
	to, reason, mutate := s.pol.failedStep(j)
	nj, err := s.st.Move(ctx, j.ID, job.Failed, to, Actor, reason, mutate)
	if err != nil {
		return err
	}
	s.moved(nj, job.Failed)
	return nil
}

// promote moves a due deferred job to queued.
func (s *Shared) promote(ctx context.Context, j *job.Job) error {
	if j.NotBefore != nil && j.NotBefore.After(time.Now()) {
		return nil // listed as due by the database's clock, not yet by ours: the next pass
	}
	nj, err := s.st.Move(ctx, j.ID, job.Deferred, job.Queued, Actor, "not_before reached", nil)
	if err != nil {
		return err
	}
	s.moved(nj, job.Deferred)
	return nil
}

// retention removes a page of each terminal state's jobs finished before
// cutoff, the first finished first, and says how many in one line.
func (s *Shared) retention(ctx context.Context, cutoff time.Time) {
	var sum retentionPass
	for _, st := range []job.State{job.Succeeded, job.Killed} {
		f := store.Filter{States: []job.State{st}, FinishedBefore: cutoff, ByFinished: true}
		s.page(ctx, f, func(ctx context.Context, j *job.Job) error {
			removed, err := s.st.Expire(ctx, j.ID, Actor, cutoff)
			if err != nil {
				return err
			}
			sum.add(removed)
			metrics.RetentionRemoved(removed.Status)
			s.log.Debug().Str("job_id", j.ID).Str("state", string(removed.Status)).Time("finished_at", removed.Finished()).Msg("removed by retention")
			return nil
		})
	}
	sum.log(s.pol, cutoff)
}
