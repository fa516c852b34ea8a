package watchdog

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/localrun"
	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// watchdogd on a shared store (PostgreSQL: agents on several hosts, one
// watchdogd per host). Each pass does two things:
//
//   - Recover on the store, with SilentAfter 0: a claim is taken away
//     (moved to stale, for managerd) when its lease, on the database's
//     clock, plus Grace has passed. The lease decides, not this host's
//     view of the agent: any host's watchdogd may recover any host's
//     claims, and every pass of every watchdogd agrees.
//   - This host's handlers (the records agentd keeps under the local
//     directory, internal/localrun): a handler whose claim is no longer
//     current — the job taken away or gone, or its last heartbeat older
//     than its lease — is stopped (SIGKILL to its process group, once
//     its identity is checked), and that is logged. The database cannot
//     stop a process on another machine; this is how each host makes
//     sure its own handlers do not outlive their lease, well within
//     the Grace that recovery waits before giving the job to another
//     host. A host frozen as a whole (its watchdogd too) runs its
//     handler until it thaws: the handler's FARRO_CLAIM_TOKEN fences its
//     own side effects.

// SharedConfig configures RunShared.
type SharedConfig struct {
	Store    store.Store
	Local    string        // this host's local directory (--spool)
	Interval time.Duration // between passes
	Grace    time.Duration // added to an expired lease before recovery
	// ScratchRetention: kept working directories of jobs finished longer
	// ago are removed (0: only those of jobs no longer in the store).
	ScratchRetention time.Duration
	Ready            func() // called once the first pass is done
	Log              zerolog.Logger
}

// RunShared runs passes every Interval until ctx is done.
func RunShared(ctx context.Context, cfg SharedConfig) error {
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	s := &shared{cfg: cfg, killed: map[string]bool{}}
	for {
		s.pass(ctx)
		if cfg.Ready != nil {
			cfg.Ready()
			cfg.Ready = nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type shared struct {
	cfg    SharedConfig
	killed map[string]bool // records whose handler was stopped, until it is gone
	dbErr  bool            // the last pass could not reach the store (logged once)
	// sweepErr: the last working directory retention pass failed (logged once)
	sweepErr bool
}

// pass is one recovery pass and one look at this host's handlers.
func (s *shared) pass(ctx context.Context) {
	log := s.cfg.Log
	outs, err := s.cfg.Store.Recover(ctx, store.RecoverOptions{Actor: Actor, Grace: s.cfg.Grace})
	if err != nil && ctx.Err() == nil {
		if !s.dbErr {
			log.Error().Err(err).Msg("recovery pass failed; retrying every interval")
		}
		s.dbErr = true
	} else if err == nil {
		if s.dbErr {
			log.Warn().Msg("recovery passes work again")
		}
		s.dbErr = false
	}
	for _, out := range outs {
		counted(out, "lease-expired", nil)
		j := &job.Job{ID: out.ID, Status: out.To, Reason: out.Detail}
		if got, err := s.cfg.Store.Get(ctx, out.ID); err == nil {
			j, j.Status = got, out.To // as recovered, whatever managerd did since
		}
		logx.Transition(log.With().Str("verdict", "lease-expired").Str("action", out.Action).Logger(), j, out.From)
	}
	s.stopLocal(ctx)
	s.sweepScratch(ctx)
}

// stopLocal stops this host's handlers whose claim is no longer current.
func (s *shared) stopLocal(ctx context.Context) {
	log := s.cfg.Log
	ents, err := localrun.List(s.cfg.Local)
	if err != nil {
		log.Error().Err(err).Msg("cannot list this host's handler records")
		return
	}
	for _, e := range ents {
		if e.Err != nil {
			log.Error().Err(e.Err).Str("path", e.Path).Msg("unreadable handler record removed")
			_ = os.Remove(e.Path)
			continue
		}
		r := e.Record
		l := log.With().Str("job_id", r.JobID).Str("agent", r.Agent).Int("pid", r.Handler.PID).Logger()
		alive, gerr := proc.GroupAlive(r.Handler)
		if !alive {
			// Gone (finished, or died with its agentd): nothing to stop.
			delete(s.killed, e.Path)
			_ = localrun.Remove(s.cfg.Local, r.Agent, r.JobID, r.ClaimToken)
			continue
		}
		if gerr != nil {
			l.Error().Err(gerr).Msg("cannot tell whether a handler of this host still runs")
			continue
		}
		why, current := s.current(ctx, r)
		if current {
			continue
		}
		if err := syscall.Kill(-r.Handler.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			l.Error().Err(err).Str("cause", why).Msg("cannot stop a handler of this host whose claim is no longer current")
			continue
		}
		if !s.killed[e.Path] {
			s.killed[e.Path] = true
			l.Warn().Str("cause", why).Int("attempt", r.Attempt).Dur("lease_ms", r.Lease()).
				Msg("stopped a handler of this host whose claim is no longer current (SIGKILL to its process group)")
		}
	}
}

// current reports whether r's claim still holds its job within its
// lease, and if not, why. A store that cannot be read counts as current:
// the agent itself stops a handler whose lease it could not renew.
func (s *shared) current(ctx context.Context, r localrun.Record) (string, bool) {
	j, err := s.cfg.Store.Get(ctx, r.JobID)
	switch {
	case errors.Is(err, job.ErrNotFound):
		return "job removed", false
	case err != nil:
		return "", true
	case j.Status != job.InProgress || j.ClaimToken != r.ClaimToken:
		return "job taken away (now " + string(j.Status) + ")", false
	case j.LastHeartbeat != nil && time.Since(*j.LastHeartbeat) > r.Lease():
		return "lease expired", false
	}
	return "", true
}
