// Package pgstore keeps farro's jobs in PostgreSQL: one queue for agents
// on many hosts. It implements store.Store with the semantics of pkg/job
// (the same states, fields, legal-transitions map, control requests and
// errors); docs/POSTGRES.md describes the schema and what is guaranteed.
//
// Every lease is on the database's clock (now() of the transaction), never
// a client's. Every write of a claim is conditional on the claim's fencing
// token and status in-progress. The legal-transitions map is enforced by
// Go and, for any writer, by a trigger.
package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// DefaultLease is a claim's lease when ClaimOptions.Lease is zero.
const DefaultLease = time.Minute

// NotifyChannel is the LISTEN/NOTIFY channel on which a transaction that
// makes a job queued (submit, release, retry) notifies, in the same
// transaction: listeners hear of it once it is committed.
const NotifyChannel = "farro_jobs"

// Store is a store.Store in a PostgreSQL database.
type Store struct {
	pool     *pgxpool.Pool
	scratch  string
	dirs     workDirs // the attempts' working directories (scratch.go)
	wait     *waiter
	commits  *batcher[*commitReq]
	controls *batcher[*controlReq]

	// testHookBeforeCommit, when set (by this package's tests), runs
	// inside Claim's and Commit's transactions just before they commit.
	testHookBeforeCommit func(op string)
}

var _ store.Store = (*Store)(nil)

// Option configures Open.
type Option func(*config)

type config struct {
	scratch  string
	maxConns int32
	tracer   pgx.QueryTracer // tests: count the statements sent
}

// WithScratch sets the directory under which each attempt gets its
// working directory on this host (Claim.Dir: <dir>/<agent>/<id>).
// Without it Claim.Dir is empty.
func WithScratch(dir string) Option { return func(c *config) { c.scratch = dir } }

// WithMaxConns bounds the connection pool (default: pgxpool's, the
// larger of 4 and the number of CPUs).
func WithMaxConns(n int) Option { return func(c *config) { c.maxConns = int32(n) } }

// Open connects to the database at url (a postgres:// URL or a libpq
// key=value string) and checks its schema: a database that was never
// migrated, or is at an older version, is refused with ErrNotMigrated
// (run farroctl migrate); one at a newer version with ErrSchemaNewer.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if cfg.maxConns > 0 {
		pc.MaxConns = cfg.maxConns
	}
	if cfg.tracer != nil {
		pc.ConnConfig.Tracer = cfg.tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if err := checkSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	s := &Store{pool: pool, scratch: cfg.scratch}
	s.wait = newWaiter(pool)
	s.commits = newBatcher(s.flushCommits, func(r *commitReq) { r.res <- commitRes{err: errClosed} })
	s.controls = newBatcher(s.flushControls, func(r *controlReq) { r.res <- controlRes{err: errClosed} })
	return s, nil
}

// Close stops the listener and closes the pool.
func (s *Store) Close() error {
	s.commits.close()
	s.controls.close()
	s.wait.close()
	s.dirs.close()
	s.pool.Close()
	return nil
}

// jobCols are the columns of a job, in scanJob's order.
const jobCols = `id, schema_version, kind, status, priority, attempts, max_attempts, created_at, updated_at,
	not_before, agent, correlation_id, claim_token, started_at, last_heartbeat, finished_at, exit_code,
	reason, error, output_dropped, control`

// scanJob reads a row of jobCols (after the leading columns in pre).
func scanJob(row pgx.Row, pre ...any) (*job.Job, []byte, error) {
	var j job.Job
	var status string
	var control []byte
	var exit *int32
	dst := append(pre, &j.ID, &j.SchemaVersion, &j.Kind, &status, &j.Priority, &j.Attempts, &j.MaxAttempts,
		&j.CreatedAt, &j.UpdatedAt, &j.NotBefore, &j.Agent, &j.CorrelationID, &j.ClaimToken, &j.StartedAt,
		&j.LastHeartbeat, &j.FinishedAt, &exit, &j.Reason, &j.Error, &j.OutputDropped, &control)
	if err := row.Scan(dst...); err != nil {
		return nil, nil, err
	}
	j.Status = job.State(status)
	if exit != nil {
		e := int(*exit)
		j.ExitCode = &e
	}
	j.CreatedAt, j.UpdatedAt = j.CreatedAt.UTC(), j.UpdatedAt.UTC()
	for _, t := range []**time.Time{&j.NotBefore, &j.StartedAt, &j.LastHeartbeat, &j.FinishedAt} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	return &j, control, nil
}

// updateJob writes every mutable field of j into its row, and control
// (nil: NULL). With token set, only if the row is still that claim's
// and in-progress. It reports whether a row was written.
func updateJob(ctx context.Context, tx pgx.Tx, j *job.Job, control []byte, token string) (bool, error) {
	var exit *int32
	if j.ExitCode != nil {
		e := int32(*j.ExitCode)
		exit = &e
	}
	q := `UPDATE jobs SET status = $2, priority = $3, attempts = $4, max_attempts = $5, updated_at = $6,
		not_before = $7, agent = $8, correlation_id = $9, claim_token = $10, started_at = $11,
		last_heartbeat = $12, finished_at = $13, exit_code = $14, reason = $15, error = $16,
		output_dropped = $17, control = $18 WHERE id = $1`
	args := []any{j.ID, string(j.Status), j.Priority, j.Attempts, j.MaxAttempts, j.UpdatedAt, j.NotBefore,
		j.Agent, j.CorrelationID, j.ClaimToken, j.StartedAt, j.LastHeartbeat, j.FinishedAt, exit, j.Reason,
		j.Error, j.OutputDropped, control}
	if token != "" {
		q += ` AND claim_token = $19 AND status = 'in-progress'`
		args = append(args, token)
	}
	tag, err := tx.Exec(ctx, q, args...)
	if err != nil {
		return false, mapErr(err)
	}
	return tag.RowsAffected() == 1, nil
}

// addEvent appends a transition of job id to its history.
func addEvent(ctx context.Context, tx pgx.Tx, id string, ev job.Event) error {
	_, err := tx.Exec(ctx, `INSERT INTO job_events (job_id, time, actor, from_state, to_state, attempt, reason, correlation_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		id, ev.Time, ev.Actor, string(ev.From), string(ev.To), ev.Attempt, ev.Reason, ev.CorrelationID)
	return mapErr(err)
}

// notify tells listeners (WaitQueued) that a job became queued, once the
// transaction commits.
func notify(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, NotifyChannel)
	return err
}

// mapErr turns the database's errors into pkg/job's and store's.
func mapErr(err error) error {
	switch pgCode(err) {
	case "":
		return err
	case "FR001": // the transitions trigger
		return fmt.Errorf("%w: %v", job.ErrIllegal, err)
	case "55P03": // lock_not_available (FOR UPDATE NOWAIT)
		return fmt.Errorf("%w: %v", store.ErrBusy, err)
	case "23505": // unique_violation
		return fmt.Errorf("%w: %v", job.ErrDuplicate, err)
	}
	return err
}

// tx runs fn in a transaction and commits it.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := fn(tx); err != nil {
		return err
	}
	return mapErr(tx.Commit(ctx))
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func states(ss []job.State) []string {
	if len(ss) == 0 {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

func nonEmpty(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	return ss
}

// Submit implements store.Store: every valid request is inserted in one
// transaction, with its first event; the transaction notifies
// NotifyChannel when it queued a job.
func (s *Store) Submit(ctx context.Context, reqs []job.SubmitRequest) ([]*job.Job, []error) {
	jobs, errs := make([]*job.Job, len(reqs)), make([]error, len(reqs))
	valid := 0
	for i := range reqs {
		if errs[i] = validate(&reqs[i]); errs[i] == nil {
			valid++
		}
	}
	if valid == 0 {
		return jobs, errs
	}
	err := s.submit(ctx, reqs, jobs, errs)
	if err != nil {
		for i := range reqs {
			if errs[i] == nil {
				jobs[i], errs[i] = nil, fmt.Errorf("submit %s: %w", reqs[i].ID, err)
			}
		}
	}
	return jobs, errs
}

// ageOf is a job's age in the claim order: the time its ID carries
// (job.IDTime), or its created_at.
func ageOf(j *job.Job) time.Time {
	if t, ok := job.IDTime(j.ID); ok {
		return t
	}
	return j.CreatedAt
}

// validate checks a request as the spool's Submit does and fills its
// defaults.
func validate(r *job.SubmitRequest) error {
	if r.ID == "" {
		r.ID = job.NewID()
	}
	if err := job.ValidateID(r.ID); err != nil {
		return err
	}
	if !job.ValidKind(r.Kind) {
		return fmt.Errorf("invalid kind %q: must match %s", r.Kind, job.KindPattern)
	}
	if len(r.Prompt) > job.MaxPromptSize {
		return fmt.Errorf("prompt is %d bytes, over the limit of %d", len(r.Prompt), job.MaxPromptSize)
	}
	if !json.Valid(r.Prompt) {
		return errors.New("prompt is not valid JSON")
	}
	if r.MaxAttempts < 0 {
		return errors.New("max attempts must not be negative")
	}
	if r.Actor == "" {
		r.Actor = "farroctl"
	}
	return nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, id string) (*job.Job, error) {
	j, _, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", id, job.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	return j, nil
}

// Prompt implements store.Store.
func (s *Store) Prompt(ctx context.Context, id string) (json.RawMessage, error) {
	var p []byte
	err := s.pool.QueryRow(ctx, `SELECT prompt FROM jobs WHERE id = $1`, id).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", id, job.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("prompt %s: %w", id, err)
	}
	return p, nil
}

// listPage is how many rows List reads per query: fn runs between pages,
// never while a query holds a connection.
const listPage = 500

// List implements store.Store: pages in ID order, each page a query
// starting after the last ID seen, so a job is seen at most once. With
// f.ByFinished the pages are in finishing order (listByFinished).
func (s *Store) List(ctx context.Context, f store.Filter, fn func(*job.Job) error) error {
	if err := f.Check(); err != nil {
		return err
	}
	var finished, due *time.Time
	if !f.FinishedBefore.IsZero() {
		finished = &f.FinishedBefore
	}
	if !f.DueBy.IsZero() {
		due = &f.DueBy
	}
	if f.ByFinished {
		return s.listByFinished(ctx, f, finished, due, fn)
	}
	return listPages(listPage, f.Limit, func(last *job.Job, n int) (pgx.Rows, error) {
		after := f.AfterID
		if last != nil {
			after = last.ID
		}
		return s.pool.Query(ctx, `SELECT `+jobCols+` FROM jobs
			WHERE ($1::text[] IS NULL OR status = ANY($1)) AND ($2::text[] IS NULL OR kind = ANY($2))
			AND ($3::timestamptz IS NULL OR coalesce(finished_at, updated_at) < $3)
			AND ($4::timestamptz IS NULL OR not_before <= $4) AND id > $5
			ORDER BY id LIMIT $6`, states(f.States), nonEmpty(f.Kinds), finished, due, after, n)
	}, fn)
}

// listDueSQL is retention's listing (List ByFinished of one terminal
// state, with FinishedBefore and no DueBy): a page of the jobs of state
// $1 that finished before $2 (of kinds $3, when not NULL), in finishing
// order after the cursor ($4, $5: the finishing time and ID of the last
// job of the page before), at most $6. It reads jobs_finished (migration
// 0007) from the cursor to the cutoff and stops at the page's end: the
// jobs not yet due are never read. The index's predicate is written out
// so that any plan, a generic one too, may use the index. The second
// branch reads the index's entries without finished_at, whose finishing
// time is updated_at (job.Job.Finished): none that farro writes, as a
// job gets finished_at when it becomes terminal; a row set terminal by
// hand may lack it.
const listDueSQL = `SELECT ` + jobCols + ` FROM (
	(SELECT finished_at AS fin, ` + jobCols + ` FROM jobs
	WHERE status IN ('succeeded', 'killed') AND status = $1 AND finished_at < $2
		AND (finished_at, id) > ($4, $5) AND ($3::text[] IS NULL OR kind = ANY($3))
	ORDER BY finished_at, id LIMIT $6)
	UNION ALL
	(SELECT updated_at, ` + jobCols + ` FROM jobs
	WHERE status IN ('succeeded', 'killed') AND status = $1 AND finished_at IS NULL AND updated_at < $2
		AND (updated_at, id) > ($4, $5) AND ($3::text[] IS NULL OR kind = ANY($3))
	ORDER BY updated_at, id LIMIT $6)
) due ORDER BY fin, id LIMIT $6`

// listByFinishedSQL is List ByFinished for any other filter: the same
// order, computed over every row the filter selects (a sort per page).
// Nothing in farro lists so; retention's listing is listDueSQL.
const listByFinishedSQL = `SELECT ` + jobCols + ` FROM jobs
	WHERE ($1::text[] IS NULL OR status = ANY($1)) AND ($2::text[] IS NULL OR kind = ANY($2))
	AND ($3::timestamptz IS NULL OR coalesce(finished_at, updated_at) < $3)
	AND ($4::timestamptz IS NULL OR not_before <= $4)
	AND (coalesce(finished_at, updated_at), id) > ($5, $6)
	ORDER BY coalesce(finished_at, updated_at), id LIMIT $7`

// listByFinished is List in finishing order (job.Job.Finished, then
// ID), a page at a time, each page starting after the finishing time and
// ID of the last job of the page before.
func (s *Store) listByFinished(ctx context.Context, f store.Filter, finished, due *time.Time, fn func(*job.Job) error) error {
	fast := len(f.States) == 1 && (f.States[0] == job.Succeeded || f.States[0] == job.Killed) && finished != nil && due == nil
	return listPages(listPage, f.Limit, func(last *job.Job, n int) (pgx.Rows, error) {
		// The first page starts before any time and any ID.
		from, fromID := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, ""
		if last != nil {
			from, fromID = pgtype.Timestamptz{Time: last.Finished(), Valid: true}, last.ID
		}
		if fast {
			return s.pool.Query(ctx, listDueSQL, string(f.States[0]), *finished, nonEmpty(f.Kinds), from, fromID, n)
		}
		return s.pool.Query(ctx, listByFinishedSQL, states(f.States), nonEmpty(f.Kinds), finished, due, from, fromID, n)
	}, fn)
}

// listPages reads jobs a page at a time: query gets the last job of the
// page before (nil for the first page), from which it takes its cursor,
// and the page's size (size, or what is left of limit when it is
// positive). fn runs with each job between pages, never while a query
// holds a connection; its error stops the listing and is returned as is.
func listPages(size, limit int, query func(last *job.Job, n int) (pgx.Rows, error), fn func(*job.Job) error) error {
	var last *job.Job
	left := limit
	for {
		n := size
		if limit > 0 && left < n {
			n = left
		}
		rows, err := query(last, n)
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		var page []*job.Job
		for rows.Next() {
			j, _, err := scanJob(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("list: %w", err)
			}
			page = append(page, j)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("list: %w", err)
		}
		for _, j := range page {
			if err := fn(j); err != nil {
				return err
			}
		}
		if len(page) < n {
			return nil
		}
		last = page[len(page)-1]
		if limit > 0 {
			if left -= len(page); left <= 0 {
				return nil
			}
		}
	}
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) (map[job.State]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM jobs GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("counts: %w", err)
	}
	defer rows.Close()
	m := make(map[job.State]int, len(job.States))
	for _, st := range job.States {
		m[st] = 0
	}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("counts: %w", err)
		}
		m[job.State(st)] = n
	}
	return m, rows.Err()
}

// History implements store.Store.
func (s *Store) History(ctx context.Context, id string) ([]job.Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT time, actor, from_state, to_state, attempt, reason, correlation_id
		FROM job_events WHERE job_id = $1 ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", id, err)
	}
	defer rows.Close()
	var evs []job.Event
	for rows.Next() {
		var ev job.Event
		var from, to string
		if err := rows.Scan(&ev.Time, &ev.Actor, &from, &to, &ev.Attempt, &ev.Reason, &ev.CorrelationID); err != nil {
			return nil, fmt.Errorf("history %s: %w", id, err)
		}
		ev.Time, ev.From, ev.To = ev.Time.UTC(), job.State(from), job.State(to)
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history %s: %w", id, err)
	}
	if len(evs) == 0 {
		if _, err := s.Get(ctx, id); err != nil {
			return nil, err
		}
	}
	return evs, nil
}

// lockJob reads job id under a row lock taken without waiting (ErrBusy
// when another transaction holds it), with the transaction's now().
func lockJob(ctx context.Context, tx pgx.Tx, id string) (*job.Job, []byte, time.Time, error) {
	var now time.Time
	j, control, err := scanJob(tx.QueryRow(ctx, `SELECT now(), `+jobCols+` FROM jobs WHERE id = $1 FOR UPDATE NOWAIT`, id), &now)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, now, job.ErrNotFound
	}
	return j, control, now.UTC(), mapErr(err)
}
