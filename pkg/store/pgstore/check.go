package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/pkg/job"
)

// Kinds of problems Check finds (farroctl fsck on a database), in the
// order it reports them.
const (
	// The database's schema is not at this build's version.
	ProblemSchema = "schema-version"
	// A running job whose lease (plus the check's grace) has passed on
	// the database's clock, or that has no lease: recovery has not taken
	// it yet (watchdogd not running, or behind).
	ProblemLeaseExpired = "lease-expired"
	// A running job whose agent has no live row in the agents table
	// (none, stopped, or its heartbeat stale).
	ProblemAgentGone = "agent-gone"
	// Holder fields that disagree with the state: a running job without
	// a claim token, agent, start or attempt; a lease on a job that is
	// not running.
	ProblemHolder = "holder-mismatch"
	// A job whose last history event does not end in its state (or that
	// has no history at all).
	ProblemHistory = "history-mismatch"
	// An operator's request that no attempt will act on: made for
	// another attempt than the job's last, unreadable, or left on a
	// finished job.
	ProblemStaleControl = "stale-control"
)

// Problem is one inconsistency Check found.
type Problem struct {
	Kind   string
	ID     string    // the job's (empty for the schema)
	State  job.State // the job's state when read
	Agent  string    // the job's agent, where it matters
	Detail string    // one line
	// Past is how long ago a job's lease ran out (lease-expired); zero
	// for a running job with no lease at all.
	Past time.Duration
	// StrayLease: a holder-mismatch that is a lease on a job not
	// running (ClearLease repairs it).
	StrayLease bool
	// control is the request a stale-control problem saw.
	control []byte
}

// Report is what Check found, read in one snapshot of the database.
type Report struct {
	SchemaVersion int       // the database's
	BuildVersion  int       // this build's (SchemaVersion())
	Now           time.Time // the database's clock
	Problems      []Problem
	Paused        []PausedKind // not a problem: listed for the operator
}

// CheckOptions tune Check.
type CheckOptions struct {
	// Grace: a lease is reported expired once it and the grace have
	// passed (recovery waits for the same, with watchdogd's own grace).
	Grace time.Duration
}

// Check reads the whole database in one read-only snapshot (repeatable
// read) and reports what disagrees with the job model: the schema
// version, running jobs whose lease expired that recovery has not taken,
// running jobs whose agent has no live row, holder fields that disagree
// with the state, a last history event that does not end in the job's
// state, and operator requests no attempt will act on. It changes
// nothing. Every query but the last event's lookups reads the jobs table
// once: a check costs about one scan of the table.
func (s *Store) Check(ctx context.Context, o CheckOptions) (Report, error) {
	r := Report{BuildVersion: SchemaVersion()}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return r, fmt.Errorf("check: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	for _, step := range []func(context.Context, pgx.Tx, *Report, CheckOptions) error{
		checkSchemaStep, checkLeases, checkAgents, checkHolders, checkHistory, checkControls, checkPaused,
	} {
		if err := step(ctx, tx, &r, o); err != nil {
			return r, fmt.Errorf("check: %w", err)
		}
	}
	return r, nil
}

func checkSchemaStep(ctx context.Context, tx pgx.Tx, r *Report, _ CheckOptions) error {
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&r.Now); err != nil {
		return err
	}
	r.Now = r.Now.UTC()
	v, err := dbVersion(ctx, tx)
	if err != nil {
		return err
	}
	r.SchemaVersion = v
	if p, ok := SchemaProblem(v); ok {
		r.Problems = append(r.Problems, p)
	}
	return nil
}

// SchemaProblem is the schema-version problem of a database at version
// db, if it is not this build's.
func SchemaProblem(db int) (Problem, bool) {
	build := SchemaVersion()
	switch {
	case db > build:
		return Problem{Kind: ProblemSchema, Detail: fmt.Sprintf("the database's schema is at version %d, newer than this build's %d", db, build)}, true
	case db == 0:
		return Problem{Kind: ProblemSchema, Detail: fmt.Sprintf("the database has no farro schema (this build's is version %d)", build)}, true
	case db < build:
		return Problem{Kind: ProblemSchema, Detail: fmt.Sprintf("the database's schema is at version %d, older than this build's %d", db, build)}, true
	}
	return Problem{}, false
}

func checkLeases(ctx context.Context, tx pgx.Tx, r *Report, o CheckOptions) error {
	rows, err := tx.Query(ctx, `SELECT id, agent, lease_until FROM jobs
		WHERE status = 'in-progress' AND (lease_until IS NULL OR lease_until + $1::interval < now())
		ORDER BY lease_until NULLS FIRST, id`, o.Grace)
	if err != nil {
		return err
	}
	type row struct {
		id, agent string
		lease     *time.Time
	}
	found, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (row, error) {
		var x row
		err := cr.Scan(&x.id, &x.agent, &x.lease)
		return x, err
	})
	if err != nil {
		return err
	}
	for _, x := range found {
		p := Problem{Kind: ProblemLeaseExpired, ID: x.id, State: job.InProgress, Agent: x.agent}
		if x.lease == nil {
			p.Detail = fmt.Sprintf("running on agent %s with no lease; recovery has not taken it", orNone(x.agent))
		} else {
			p.Past = r.Now.Sub(*x.lease)
			p.Detail = fmt.Sprintf("lease of agent %s expired %s ago (at %s, database clock); recovery has not taken it",
				orNone(x.agent), p.Past.Round(time.Millisecond), x.lease.UTC().Format(time.RFC3339Nano))
		}
		r.Problems = append(r.Problems, p)
	}
	return nil
}

func checkAgents(ctx context.Context, tx pgx.Tx, r *Report, _ CheckOptions) error {
	rows, err := tx.Query(ctx, `SELECT j.id, j.agent, a.host, a.stopped_at, now() - a.heartbeat_at FROM jobs j
		LEFT JOIN agents a ON a.kind = 'agentd' AND a.id = j.agent
		WHERE j.status = 'in-progress' AND j.agent <> ''
		AND (a.id IS NULL OR a.stopped_at IS NOT NULL OR a.live_until <= now())
		ORDER BY j.agent, j.id`)
	if err != nil {
		return err
	}
	type row struct {
		id, agent string
		host      *string
		stopped   *time.Time
		silent    *time.Duration
	}
	found, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (row, error) {
		var x row
		err := cr.Scan(&x.id, &x.agent, &x.host, &x.stopped, &x.silent)
		return x, err
	})
	if err != nil {
		return err
	}
	for _, x := range found {
		p := Problem{Kind: ProblemAgentGone, ID: x.id, State: job.InProgress, Agent: x.agent}
		switch {
		case x.host == nil:
			p.Detail = fmt.Sprintf("running on agent %s, which has no row in the agents table", x.agent)
		case x.stopped != nil:
			p.Detail = fmt.Sprintf("running on agent %s (host %s), which stopped at %s", x.agent, *x.host, x.stopped.UTC().Format(time.RFC3339))
		default:
			p.Detail = fmt.Sprintf("running on agent %s (host %s), silent for %s (no heartbeat in the agents table)", x.agent, *x.host, x.silent.Round(time.Second))
		}
		r.Problems = append(r.Problems, p)
	}
	return nil
}

func checkHolders(ctx context.Context, tx pgx.Tx, r *Report, _ CheckOptions) error {
	rows, err := tx.Query(ctx, `SELECT id, status, agent, claim_token = '', agent = '', started_at IS NULL, attempts < 1,
			lease_until IS NOT NULL AND status <> 'in-progress'
		FROM jobs
		WHERE (status = 'in-progress' AND (claim_token = '' OR agent = '' OR started_at IS NULL OR attempts < 1))
		OR (status <> 'in-progress' AND lease_until IS NOT NULL)
		ORDER BY id`)
	if err != nil {
		return err
	}
	type row struct {
		id, status, agent                           string
		noToken, noAgent, noStart, noAttempt, lease bool
	}
	found, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (row, error) {
		var x row
		err := cr.Scan(&x.id, &x.status, &x.agent, &x.noToken, &x.noAgent, &x.noStart, &x.noAttempt, &x.lease)
		return x, err
	})
	if err != nil {
		return err
	}
	for _, x := range found {
		p := Problem{Kind: ProblemHolder, ID: x.id, State: job.State(x.status), Agent: x.agent}
		if x.lease {
			p.StrayLease = true
			p.Detail = fmt.Sprintf("a lease (lease_until) on a %s job: only a running job holds one", x.status)
		} else {
			var missing []string
			for _, m := range []struct {
				is   bool
				what string
			}{{x.noToken, "claim token"}, {x.noAgent, "agent"}, {x.noStart, "started_at"}, {x.noAttempt, "attempt"}} {
				if m.is {
					missing = append(missing, m.what)
				}
			}
			p.Detail = "in-progress without " + strings.Join(missing, ", ") + ": no claim holds it"
		}
		r.Problems = append(r.Problems, p)
	}
	return nil
}

func checkHistory(ctx context.Context, tx pgx.Tx, r *Report, _ CheckOptions) error {
	rows, err := tx.Query(ctx, `SELECT j.id, j.status, e.to_state FROM jobs j
		LEFT JOIN LATERAL (SELECT to_state FROM job_events WHERE job_id = j.id ORDER BY seq DESC LIMIT 1) e ON true
		WHERE e.to_state IS DISTINCT FROM j.status
		ORDER BY j.id`)
	if err != nil {
		return err
	}
	type row struct {
		id, status string
		last       *string
	}
	found, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (row, error) {
		var x row
		err := cr.Scan(&x.id, &x.status, &x.last)
		return x, err
	})
	if err != nil {
		return err
	}
	for _, x := range found {
		p := Problem{Kind: ProblemHistory, ID: x.id, State: job.State(x.status)}
		if x.last == nil {
			p.Detail = fmt.Sprintf("status %s and no history at all", x.status)
		} else {
			p.Detail = fmt.Sprintf("status %s, but its last event moved it to %s", x.status, *x.last)
		}
		r.Problems = append(r.Problems, p)
	}
	return nil
}

func checkControls(ctx context.Context, tx pgx.Tx, r *Report, _ CheckOptions) error {
	rows, err := tx.Query(ctx, `SELECT `+jobCols+` FROM jobs WHERE control IS NOT NULL ORDER BY id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		j, raw, err := scanJob(rows)
		if err != nil {
			return err
		}
		if why := staleControl(j, raw); why != "" {
			r.Problems = append(r.Problems, Problem{Kind: ProblemStaleControl, ID: j.ID, State: j.Status, Agent: j.Agent,
				Detail: why, control: raw})
		}
	}
	return rows.Err()
}

// staleControl says why the request raw travelling with j will never be
// acted on ("" when it still may be: made for j's last attempt, and j
// running or in a state a move from which applies it).
func staleControl(j *job.Job, raw []byte) string {
	if raw == nil {
		return ""
	}
	c := parseControl(raw)
	switch {
	case c == nil:
		return fmt.Sprintf("unreadable operator request on a %s job", j.Status)
	case !c.For(j):
		return fmt.Sprintf("operator's %s request made for another attempt than the job's last (%s job, attempt %d)", c.Action, j.Status, j.Attempts)
	case j.Status.Terminal():
		return fmt.Sprintf("operator's %s request left on a %s job (it came as the job finished)", c.Action, j.Status)
	}
	return ""
}

func checkPaused(ctx context.Context, tx pgx.Tx, r *Report, _ CheckOptions) error {
	rows, err := tx.Query(ctx, `SELECT kind, paused_at, paused_by, os_user, host, pid, reason FROM paused_kinds ORDER BY kind`)
	if err != nil {
		return err
	}
	r.Paused, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (PausedKind, error) {
		var p PausedKind
		err := row.Scan(&p.Kind, &p.PausedAt, &p.By, &p.User, &p.Host, &p.PID, &p.Reason)
		p.PausedAt = p.PausedAt.UTC()
		return p, err
	})
	return err
}

func orNone(agent string) string {
	if agent == "" {
		return "(none)"
	}
	return agent
}

// ErrChanged: a repair found the row no longer as the check saw it; it
// changed nothing (run the check again).
var ErrChanged = errors.New("changed since the check; run it again")

// ClearStaleControl drops the request p (a stale-control problem) from
// its job, in one transaction under the row's lock, only while the row
// still carries that request and it is still stale.
func (s *Store) ClearStaleControl(ctx context.Context, p Problem) error {
	if p.Kind != ProblemStaleControl {
		return fmt.Errorf("clear control %s: not a stale-control problem", p.ID)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		j, raw, _, err := lockJob(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		if raw == nil {
			return fmt.Errorf("%w: the request is gone", ErrChanged)
		}
		if staleControl(j, raw) == "" || !jsonEqual(ctx, tx, raw, p.control) {
			return ErrChanged
		}
		_, err = tx.Exec(ctx, `UPDATE jobs SET control = NULL WHERE id = $1`, p.ID)
		return err
	})
}

// jsonEqual compares two jsonb values as the database does.
func jsonEqual(ctx context.Context, tx pgx.Tx, a, b []byte) bool {
	var eq bool
	if tx.QueryRow(ctx, `SELECT $1::jsonb = $2::jsonb`, a, b).Scan(&eq) != nil {
		return false
	}
	return eq
}

// ClearLease drops the lease of job id while it is not running (a
// holder-mismatch problem: a lease on a job that is not in progress).
func (s *Store) ClearLease(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE jobs SET lease_until = NULL WHERE id = $1 AND status <> 'in-progress' AND lease_until IS NOT NULL`, id)
	if err != nil {
		return fmt.Errorf("clear lease %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrChanged
	}
	return nil
}
