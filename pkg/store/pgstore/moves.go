package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// parseControl decodes the control column (nil: none). A request that
// cannot be read is present but nil: whoever finds it drops it.
func parseControl(b []byte) *job.Control {
	if b == nil {
		return nil
	}
	var c job.Control
	if json.Unmarshal(b, &c) != nil {
		return nil
	}
	if _, _, ok := c.Target(); !ok {
		return nil
	}
	return &c
}

// pendingControl is pkg/job's rule for a request travelling with job j
// in state from: the target and reason when it was made for j's attempt
// and is reachable from from; present says whether anything is there.
func pendingControl(raw []byte, from job.State, j *job.Job) (to job.State, reason string, c *job.Control, ok, present bool) {
	present = raw != nil
	c = parseControl(raw)
	if c == nil || !c.For(j) {
		return "", "", c, false, present
	}
	to, reason, _ = c.Target()
	if from != to && !job.CanTransition(from, to) {
		return "", "", c, false, present
	}
	return to, reason, c, true, present
}

// apply moves j (locked by the caller's transaction, read at now) to to,
// as the spool's apply does, and records the event. control is the value
// the control column keeps (nil: dropped).
func apply(ctx context.Context, tx pgx.Tx, j *job.Job, now time.Time, to job.State, actor, reason string, control []byte, mutate func(*job.Job) error) (*job.Job, error) {
	nj := j.Clone()
	nj.Status, nj.UpdatedAt, nj.Reason = to, now, reason
	if to != job.Deferred {
		nj.NotBefore = nil
	}
	if (to == job.Killed || to == job.Succeeded) && nj.FinishedAt == nil {
		nj.FinishedAt = &now
	}
	if mutate != nil {
		if err := mutate(nj); err != nil {
			return nil, fmt.Errorf("move %s: %w", j.ID, err)
		}
	}
	if _, err := updateJob(ctx, tx, nj, control, ""); err != nil {
		return nil, fmt.Errorf("move %s: %w", j.ID, err)
	}
	ev := job.Event{Time: now, Actor: actor, From: j.Status, To: nj.Status, Attempt: nj.Attempts, Reason: reason, CorrelationID: nj.CorrelationID}
	if err := addEvent(ctx, tx, j.ID, ev); err != nil {
		return nil, fmt.Errorf("move %s: %w", j.ID, err)
	}
	if nj.Status == job.Queued {
		if err := notify(ctx, tx); err != nil {
			return nil, fmt.Errorf("move %s: %w", j.ID, err)
		}
	}
	return nj, nil
}

// Move implements store.Store with pkg/job's Move rules: the row is
// locked without waiting (ErrBusy), a control request for the job's last
// attempt wins over the move, and the trigger checks the transition
// again.
func (s *Store) Move(ctx context.Context, id string, from, to job.State, actor, reason string, mutate func(*job.Job) error) (*job.Job, error) {
	if err := job.ValidateID(id); err != nil {
		return nil, err
	}
	if !job.CanTransition(from, to) {
		return nil, fmt.Errorf("move %s: %w: %s -> %s", id, job.ErrIllegal, from, to)
	}
	if from == job.InProgress || to == job.InProgress {
		return nil, fmt.Errorf("move %s: %w: in-progress jobs move only by their holder or by recovery, and only Claim makes them", id, job.ErrIllegal)
	}
	var out *job.Job
	err := s.tx(ctx, func(tx pgx.Tx) error {
		j, raw, now, err := lockJob(ctx, tx, id)
		if err != nil {
			return err
		}
		if j.Status != from {
			return fmt.Errorf("%w: status is %s", job.ErrState, j.Status)
		}
		to, reason, mutate := to, reason, mutate
		cto, creason, ctl, ok, present := pendingControl(raw, from, j)
		switch {
		case ok && cto == from:
			// Fulfilled already: dropped, the mover's plan goes ahead.
		case ok:
			to, reason = cto, creason
			mutate = func(nj *job.Job) error { ctl.Refund(nj); return nil }
		case ctl != nil && ctl.For(j) && to.Terminal() && job.CanTransition(from, job.Queued):
			to, mutate = job.Queued, nil
			reason = "kept for the operator's " + ctl.Action + " request"
		}
		keep := raw
		if present && (ok || ctl == nil || !ctl.For(j)) {
			keep = nil
		}
		out, err = apply(ctx, tx, j, now, to, actor, reason, keep, mutate)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("move %s: %w", id, err)
	}
	return out, nil
}

// RequestControl implements store.Store: the request is stored with the
// job, naming its current attempt (claim token and attempts), in one
// statement that matches only an in-progress job.
func (s *Store) RequestControl(ctx context.Context, id string, c job.Control) error {
	if err := job.ValidateID(id); err != nil {
		return err
	}
	if _, _, ok := c.Target(); !ok {
		return fmt.Errorf("control %s: unknown action %q", id, c.Action)
	}
	if c.Actor == "" {
		c.Actor = "farroctl"
	}
	if c.RequestedAt.IsZero() {
		c.RequestedAt = time.Now().UTC()
	}
	c.ClaimToken, c.Attempt = "", 0
	b, _ := json.Marshal(c)
	tag, err := s.pool.Exec(ctx, `UPDATE jobs SET control = $2::jsonb || jsonb_build_object('claim_token', claim_token, 'attempt', attempts)
		WHERE id = $1 AND status = 'in-progress'`, id, b)
	if err != nil {
		return fmt.Errorf("control %s: %w", id, mapErr(err))
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	j, err := s.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("control %s: %w", id, err)
	}
	return fmt.Errorf("control %s: %w: status is %s, not in-progress", id, job.ErrState, j.Status)
}

// retrySetting is the session setting that lets the transitions trigger
// take a terminal job back to queued, set with SET LOCAL by Retry only.
const retrySetting = "farro.retry"

// Retry implements store.Store.
func (s *Store) Retry(ctx context.Context, id, actor string, includeSucceeded bool) (*job.Job, error) {
	if err := job.ValidateID(id); err != nil {
		return nil, err
	}
	var out *job.Job
	err := s.tx(ctx, func(tx pgx.Tx) error {
		j, _, now, err := lockJob(ctx, tx, id)
		if err != nil {
			return err
		}
		if j.Status != job.Killed && !(includeSucceeded && j.Status == job.Succeeded) {
			return fmt.Errorf("%w: is %s", job.ErrState, j.Status)
		}
		if _, err := tx.Exec(ctx, `SELECT set_config($1, 'on', true)`, retrySetting); err != nil {
			return err
		}
		nj := j.Clone()
		nj.Status, nj.Reason, nj.UpdatedAt = job.Queued, job.ReasonRetried, now
		nj.Attempts, nj.Error, nj.ExitCode = 0, "", nil
		nj.NotBefore, nj.Agent, nj.ClaimToken, nj.CorrelationID = nil, "", "", ""
		nj.StartedAt, nj.LastHeartbeat, nj.FinishedAt = nil, nil, nil
		if _, err := updateJob(ctx, tx, nj, nil, ""); err != nil {
			return err
		}
		if err := addEvent(ctx, tx, id, job.Event{Time: now, Actor: actor, From: j.Status, To: job.Queued, Reason: job.ReasonRetried}); err != nil {
			return err
		}
		out = nj
		return notify(ctx, tx)
	})
	if err != nil {
		return nil, fmt.Errorf("retry %s: %w", id, err)
	}
	return out, nil
}

// Remove implements store.Store.
func (s *Store) Remove(ctx context.Context, id, actor string) (*job.Job, error) {
	return s.remove(ctx, id, "rm", nil)
}

// Expire implements store.Store.
func (s *Store) Expire(ctx context.Context, id, actor string, cutoff time.Time) (*job.Job, error) {
	return s.remove(ctx, id, "retention", func(j *job.Job) error {
		if f := j.Finished(); !f.Before(cutoff) {
			return fmt.Errorf("%w: finished at %s", job.ErrNotExpired, f.UTC().Format(time.RFC3339))
		}
		return nil
	})
}

// remove deletes a terminal job (and its history) under its row lock.
func (s *Store) remove(ctx context.Context, id, op string, check func(*job.Job) error) (*job.Job, error) {
	if err := job.ValidateID(id); err != nil {
		return nil, err
	}
	var out *job.Job
	err := s.tx(ctx, func(tx pgx.Tx) error {
		j, _, _, err := lockJob(ctx, tx, id)
		if err != nil {
			return err
		}
		if !j.Status.Terminal() {
			return fmt.Errorf("%w: is %s", job.ErrState, j.Status)
		}
		if check != nil {
			if err := check(j); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM jobs WHERE id = $1`, id); err != nil {
			return mapErr(err)
		}
		out = j
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", op, id, err)
	}
	return out, nil
}

// Recover implements store.Store on the database's clock: an in-progress
// job is taken away (moved to stale, its holder fenced by the status)
// once its lease plus opts.Grace has passed, or once its holder has not
// heart-beaten for opts.SilentAfter plus opts.Grace (the caller's own
// judgement of silence, as in a spool: zero leaves it to the lease). A holder that
// heart-beats within both is never touched. Rows another transaction is
// changing are skipped (the next pass sees them).
func (s *Store) Recover(ctx context.Context, opts store.RecoverOptions) ([]job.Outcome, error) {
	return s.recover(ctx, opts, nil)
}

// RecoverJobs is Recover limited to the jobs ids (farroctl fsck
// --repair: only the jobs it reported), by the same rules.
func (s *Store) RecoverJobs(ctx context.Context, ids []string, opts store.RecoverOptions) ([]job.Outcome, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return s.recover(ctx, opts, ids)
}

// recover is Recover, of the jobs ids only when ids is not nil.
func (s *Store) recover(ctx context.Context, opts store.RecoverOptions, ids []string) ([]job.Outcome, error) {
	if opts.Actor == "" {
		opts.Actor = "watchdogd"
	}
	if opts.SilentAfter > 0 && opts.SilentAfter < time.Microsecond {
		opts.SilentAfter = time.Microsecond // the database's resolution
	}
	var outs []job.Outcome
	err := s.tx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT now(), lease_until, `+jobCols+` FROM jobs
			WHERE status = 'in-progress' AND (lease_until IS NULL OR lease_until + $1::interval < now()
				OR ($2::interval > '0' AND last_heartbeat < now() - $2::interval - $1::interval))
			AND ($3::text[] IS NULL OR id = ANY($3))
			ORDER BY lease_until FOR UPDATE SKIP LOCKED`, opts.Grace, opts.SilentAfter, ids)
		if err != nil {
			return err
		}
		type gone struct {
			j     *job.Job
			raw   []byte
			now   time.Time
			lease *time.Time
		}
		var gs []gone
		for rows.Next() {
			var g gone
			var err error
			if g.j, g.raw, err = scanJob(rows, &g.now, &g.lease); err != nil {
				rows.Close()
				return err
			}
			gs = append(gs, g)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, g := range gs {
			lease := g.lease
			var why string
			switch {
			case lease == nil:
				why = fmt.Sprintf("agent %s's claim has no lease", g.j.Agent)
			case lease.Add(opts.Grace).Before(g.now):
				why = fmt.Sprintf("lease of agent %s expired at %s", g.j.Agent, lease.UTC().Format(time.RFC3339Nano))
			default:
				why = fmt.Sprintf("agent %s silent for %s", g.j.Agent, g.now.Sub(*g.j.LastHeartbeat).Round(time.Millisecond))
			}
			now := g.now.UTC()
			nj := g.j.Clone()
			nj.Status, nj.UpdatedAt, nj.Reason, nj.FinishedAt = job.Stale, now, why, &now
			if _, err := updateJob(ctx, tx, nj, g.raw, ""); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE jobs SET lease_until = NULL WHERE id = $1`, nj.ID); err != nil {
				return err
			}
			if err := addEvent(ctx, tx, nj.ID, job.Event{Time: now, Actor: opts.Actor, From: job.InProgress, To: job.Stale,
				Attempt: nj.Attempts, Reason: why, CorrelationID: nj.CorrelationID}); err != nil {
				return err
			}
			outs = append(outs, job.Outcome{ID: nj.ID, Action: job.ActionStale, From: job.InProgress, To: job.Stale, Detail: why})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	return outs, nil
}

// errFenced says that the claim of job id no longer holds it.
func errFenced(id string) error {
	return fmt.Errorf("%s: the job is no longer this claim's (recovered, or claimed again): %w", id, job.ErrFenced)
}
