package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// Claim implements store.Store: one transaction per batch. It selects the
// best queued jobs that are due (priority, then age, then ID)
// with FOR UPDATE SKIP LOCKED, so that claimers never wait for each other
// nor take the same job; applies instead of running an operator's request
// made for a job's last attempt; and marks the rest in-progress with a new
// attempt, correlation id, fencing token and a lease on the database's
// clock, with their events.
func (s *Store) Claim(ctx context.Context, h job.Holder, opts store.ClaimOptions) ([]store.Claim, error) {
	if err := job.ValidateID(h.Agent); err != nil {
		return nil, fmt.Errorf("agent id: %w", err)
	}
	max := opts.Max
	if max < 1 {
		max = 1
	}
	lease := opts.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	out, slow, err := s.claimFast(ctx, h, opts.Kinds, max, lease)
	if err == nil && slow {
		out, _, err = s.claimSlow(ctx, h, opts.Kinds, max, lease)
	}
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if len(out) == max {
		// The queue may hold more: another waiting slot claims too
		// (a notification wakes one waiter; see waiter).
		s.wait.wakeOne()
	}
	return s.claimed(ctx, h, out)
}

// claimSlow is Claim's transaction for a batch in which a job carries an
// operator's request: the requests are applied in Go (pkg/job's rules),
// the rest claimed, in one transaction of several statements.
func (s *Store) claimSlow(ctx context.Context, h job.Holder, kinds []string, max int, lease time.Duration) ([]store.Claim, bool, error) {
	opts := store.ClaimOptions{Kinds: kinds}
	var out []store.Claim
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, `SELECT now(), `+jobCols+` FROM jobs
			WHERE status = 'queued' AND (not_before IS NULL OR not_before <= now())
			AND ($1::text[] IS NULL OR kind = ANY($1))
			AND (jobs.kind || '') <> ALL (ARRAY(SELECT kind FROM paused_kinds)) -- pausedTest
			ORDER BY priority DESC, age_key, id LIMIT $2 FOR UPDATE SKIP LOCKED`, nonEmpty(opts.Kinds), max)
		if err != nil {
			return err
		}
		type pick struct {
			j   *job.Job
			raw []byte
			now time.Time
		}
		var picks []pick
		for rows.Next() {
			var p pick
			var err error
			if p.j, p.raw, err = scanJob(rows, &p.now); err != nil {
				rows.Close()
				return err
			}
			picks = append(picks, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var ids, tokens, corrs []string
		for _, p := range picks {
			to, reason, ctl, ok, _ := pendingControl(p.raw, job.Queued, p.j)
			if ok && to != job.Queued {
				if _, err := apply(ctx, tx, p.j, p.now.UTC(), to, h.Actor, reason, nil, func(nj *job.Job) error { ctl.Refund(nj); return nil }); err != nil {
					return err
				}
				continue
			}
			ids = append(ids, p.j.ID)
			tokens = append(tokens, randHex(8))
			corrs = append(corrs, fmt.Sprintf("%s/%d-%s", p.j.ID, p.j.Attempts+1, randHex(3)))
		}
		if len(ids) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, `UPDATE jobs j SET status = 'in-progress', attempts = j.attempts + 1, agent = $4,
				correlation_id = u.corr, claim_token = u.token, started_at = now(), last_heartbeat = now(),
				lease_until = now() + $5::interval, updated_at = now(), finished_at = NULL, exit_code = NULL,
				reason = '', error = '', not_before = NULL, output_dropped = 0, control = NULL, handler = NULL
			FROM unnest($1::text[], $2::text[], $3::text[]) AS u(id, token, corr)
			WHERE j.id = u.id AND j.status = 'queued'
			RETURNING `+qualified("j", jobCols), ids, tokens, corrs, h.Agent, lease)
		if err != nil {
			return mapErr(err)
		}
		var claimed []*job.Job
		for rows.Next() {
			j, _, err := scanJob(rows)
			if err != nil {
				rows.Close()
				return err
			}
			claimed = append(claimed, j)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return mapErr(err)
		}
		for _, j := range claimed {
			if err := addEvent(ctx, tx, j.ID, job.Event{Time: *j.StartedAt, Actor: h.Actor, From: job.Queued, To: job.InProgress,
				Attempt: j.Attempts, CorrelationID: j.CorrelationID}); err != nil {
				return err
			}
		}
		prompts, err := readPrompts(ctx, tx, ids)
		if err != nil {
			return err
		}
		if s.testHookBeforeCommit != nil {
			s.testHookBeforeCommit("claim")
		}
		for _, j := range claimed {
			out = append(out, &claim{s: s, holder: h, lease: lease, token: j.ClaimToken, j: j, prompt: prompts[j.ID]})
		}
		return nil
	})
	return out, false, err
}

// claimed gives the claims their working directories on this host.
func (s *Store) claimed(ctx context.Context, h job.Holder, out []store.Claim) ([]store.Claim, error) {
	var err error
	// Sorted as the select ordered them (RETURNING has no order).
	sortClaims(out)
	if s.scratch == "" {
		return out, nil
	}
	for _, sc := range out {
		c := sc.(*claim)
		if c.dir, c.placed, err = s.takeDir(h.Agent, c.j.ID, c.prompt); err != nil {
			err = fmt.Errorf("claim %s: %w", c.j.ID, err)
			break
		}
	}
	if err != nil {
		// No attempt can run here (a full disk, say): every job goes
		// back to queued at once, its attempt not counted, rather than
		// waiting in-progress for its lease to run out.
		for _, sc := range out {
			if rerr := sc.Commit(ctx, job.Queued, "released: "+err.Error(), func(nj *job.Job) { nj.Attempts-- }); rerr != nil {
				err = fmt.Errorf("%w (and releasing %s: %v)", err, sc.Job().ID, rerr)
			}
		}
		return nil, err
	}
	return out, nil
}

// qualified prefixes each of cols with t. (for RETURNING after a join).
func qualified(t, cols string) string {
	var b []byte
	start := true
	for i := 0; i < len(cols); i++ {
		c := cols[i]
		if start && c != ' ' && c != '\t' && c != '\n' {
			b = append(b, t...)
			b = append(b, '.')
			start = false
		}
		if c == ',' {
			start = true
		}
		b = append(b, c)
	}
	return string(b)
}

func readPrompts(ctx context.Context, tx pgx.Tx, ids []string) (map[string][]byte, error) {
	rows, err := tx.Query(ctx, `SELECT id, prompt FROM jobs WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := make(map[string][]byte, len(ids))
	for rows.Next() {
		var id string
		var p []byte
		if err := rows.Scan(&id, &p); err != nil {
			return nil, err
		}
		m[id] = p
	}
	return m, rows.Err()
}

func sortClaims(cs []store.Claim) {
	less := func(a, b *job.Job) bool {
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if ta, tb := ageOf(a), ageOf(b); !ta.Equal(tb) {
			return ta.Before(tb)
		}
		return a.ID < b.ID
	}
	for i := 1; i < len(cs); i++ {
		for k := i; k > 0 && less(cs[k].(*claim).j, cs[k-1].(*claim).j); k-- {
			cs[k], cs[k-1] = cs[k-1], cs[k]
		}
	}
}

// claim is one attempt leased from the database.
type claim struct {
	s        *Store
	holder   job.Holder
	lease    time.Duration
	token    string
	prompt   []byte
	dir      string
	placed   bool // the prompt is in dir already (a recycled directory's)
	dirGiven bool // dir went back to its pool (or was kept): once

	mu        sync.Mutex
	j         *job.Job
	done      bool
	committed *job.Job // the outcome a Commit sent, while its result is unknown
}

func (c *claim) Job() *job.Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.j.Clone()
}

func (c *claim) Prompt() json.RawMessage { return append(json.RawMessage(nil), c.prompt...) }
func (c *claim) Token() string           { return c.token }
func (c *claim) Dir() string             { return c.dir }

// heartbeatSQL renews a claim's lease. It changes no indexed column, so
// that it can be a HOT update (no new index entry).
const heartbeatSQL = `UPDATE jobs SET last_heartbeat = now(), updated_at = now(), lease_until = now() + $3::interval
	WHERE id = $1 AND claim_token = $2 AND status = 'in-progress' RETURNING last_heartbeat, updated_at`

// Heartbeat renews the lease (now() + the claim's lease) and
// last_heartbeat, only while the row is still this claim's.
func (c *claim) Heartbeat(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil
	}
	var hb, upd time.Time
	err := c.s.pool.QueryRow(ctx, heartbeatSQL, c.j.ID, c.token, c.lease).Scan(&hb, &upd)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("heartbeat: %w", errFenced(c.j.ID))
	}
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", c.j.ID, err)
	}
	hb = hb.UTC()
	j := c.j.Clone()
	j.LastHeartbeat, j.UpdatedAt = &hb, upd.UTC()
	c.j = j
	return nil
}

// PendingControl returns the request made for this attempt; reading it
// proves the claim still holds the job (ErrFenced otherwise).
func (c *claim) PendingControl(ctx context.Context) (*job.Control, error) {
	c.mu.Lock()
	id, j := c.j.ID, c.j
	c.mu.Unlock()
	held, raw, err := c.s.pendingControl(ctx, id, c.token)
	if err != nil {
		return nil, fmt.Errorf("control %s: %w", id, err)
	}
	if !held {
		return nil, fmt.Errorf("control: %w", errFenced(id))
	}
	ctl := parseControl(raw)
	if ctl == nil {
		return nil, nil
	}
	if ctl.ClaimToken != "" && ctl.ClaimToken != c.token {
		return nil, nil
	}
	if ctl.ClaimToken == "" && !ctl.For(j) {
		return nil, nil
	}
	return ctl, nil
}

// RecordHandler stores the handler's identity with the job (once: a
// recorded identity is never replaced), only while the claim holds it.
func (c *claim) RecordHandler(ctx context.Context, id proc.Identity) error {
	c.mu.Lock()
	jid, done := c.j.ID, c.done
	c.mu.Unlock()
	if done {
		return nil
	}
	b, _ := json.Marshal(id)
	tag, err := c.s.pool.Exec(ctx, `UPDATE jobs SET handler = coalesce(handler, $3::jsonb)
		WHERE id = $1 AND claim_token = $2 AND status = 'in-progress'`, jid, c.token, b)
	if err != nil {
		return fmt.Errorf("record handler: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("record handler: %w", errFenced(jid))
	}
	return nil
}

// Fence proves the claim still holds its job.
func (c *claim) Fence(ctx context.Context) error {
	c.mu.Lock()
	id, done := c.j.ID, c.done
	c.mu.Unlock()
	if done {
		return fmt.Errorf("%s: already committed: %w", id, job.ErrFenced)
	}
	var one int
	err := c.s.pool.QueryRow(ctx, `SELECT 1 FROM jobs WHERE id = $1 AND claim_token = $2 AND status = 'in-progress'`, id, c.token).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return errFenced(id)
	}
	if err != nil {
		return fmt.Errorf("fence %s: %w", id, err)
	}
	return nil
}

// Commit ends the attempt in one transaction: the row, locked, must
// still be this claim's and in-progress; the new lifecycle and its event
// are written together. A request of the operator's for this attempt
// whose target is the commit's is fulfilled and dropped; any other
// travels with the job. A Commit whose result was lost (a cut
// connection) may be called again: if the first did commit, the second
// finds the outcome and returns nil.
func (c *claim) Commit(ctx context.Context, to job.State, reason string, mutate func(*job.Job)) error {
	err := c.commit(ctx, to, reason, mutate)
	c.attemptOver(err)
	return err
}

func (c *claim) commit(ctx context.Context, to job.State, reason string, mutate func(*job.Job)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.j
	if c.done {
		return fmt.Errorf("commit %s: already committed", cur.ID)
	}
	if !job.CanTransition(cur.Status, to) {
		return fmt.Errorf("commit %s: %w: %s -> %s", cur.ID, job.ErrIllegal, cur.Status, to)
	}
	if c.committed == nil {
		// The common case goes in a batch (batch.go); the batch leaves
		// what needs pkg/job's rules to this commit's own transaction.
		bj := cur.Clone()
		bj.Status, bj.UpdatedAt, bj.Reason = to, sentinel, reason
		if to != job.Queued {
			fin := sentinel
			bj.FinishedAt = &fin
		}
		if mutate != nil {
			mutate(bj)
		}
		finNow := bj.FinishedAt != nil && bj.FinishedAt.Equal(sentinel)
		if bj.UpdatedAt.Equal(sentinel) && bj.Status == to && cur.Status == job.InProgress {
			c.committed = bj
			now, err := c.s.commit(ctx, &commitReq{c: c, nj: bj, finishedNow: finNow, res: make(chan commitRes, 1)})
			if err == nil {
				bj.UpdatedAt = now
				if finNow {
					bj.FinishedAt = &now
				}
				c.done, c.j, c.committed = true, bj, nil
				return nil
			}
			if !errors.Is(err, errNotBatched) {
				return fmt.Errorf("commit %s: %w", cur.ID, err)
			}
		}
	}
	var nj *job.Job
	err := c.s.tx(ctx, func(tx pgx.Tx) error {
		var now time.Time
		var raw []byte
		var status, token string
		err := tx.QueryRow(ctx, `SELECT now(), control, status, claim_token FROM jobs WHERE id = $1 FOR UPDATE`, cur.ID).Scan(&now, &raw, &status, &token)
		if errors.Is(err, pgx.ErrNoRows) {
			return errFenced(cur.ID)
		}
		if err != nil {
			return err
		}
		if token != c.token || status != string(job.InProgress) {
			if c.committed != nil && token == c.token && status == string(c.committed.Status) {
				// The first call committed: its outcome is the row.
				nj, _, err = scanJob(tx.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = $1`, cur.ID))
				return err
			}
			return errFenced(cur.ID)
		}
		now = now.UTC()
		nj = cur.Clone()
		nj.Status, nj.UpdatedAt, nj.Reason = to, now, reason
		if to != job.Queued {
			nj.FinishedAt = &now
		}
		if mutate != nil {
			mutate(nj)
		}
		keep := raw
		if ctl := parseControl(raw); raw != nil && (ctl == nil || !ctl.For(nj)) {
			keep = nil // unreadable, or another attempt's
		} else if ctl != nil {
			if cto, _, _ := ctl.Target(); cto == nj.Status {
				keep = nil // fulfilled by this commit
			}
		}
		c.committed = nj
		ok, err := updateJob(ctx, tx, nj, keep, c.token)
		if err != nil {
			return err
		}
		if !ok {
			return errFenced(cur.ID)
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET lease_until = NULL WHERE id = $1`, cur.ID); err != nil {
			return err
		}
		if err := addEvent(ctx, tx, cur.ID, job.Event{Time: now, Actor: c.holder.Actor, From: cur.Status, To: nj.Status,
			Attempt: nj.Attempts, Reason: nj.Reason, CorrelationID: nj.CorrelationID}); err != nil {
			return err
		}
		if nj.Status == job.Queued {
			if err := notify(ctx, tx); err != nil {
				return err
			}
		}
		if c.s.testHookBeforeCommit != nil {
			c.s.testHookBeforeCommit("commit")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit %s: %w", cur.ID, err)
	}
	c.done, c.j, c.committed = true, nj, nil
	return nil
}
