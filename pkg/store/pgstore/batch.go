package pgstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/farro-dev/farro/pkg/job"
)

// Commits in batches. The commits of a Store's claims (every slot of an
// agent) are gathered and written by one statement per batch (batchSQL):
// one round trip and one durable commit (one WAL flush) for all of them,
// as the spool's group commit shares one barrier. There is no added
// wait: a commit that finds no batch being written is written at once;
// those that arrive meanwhile go together in the next one.
//
// Each row is still fenced on its own (its claim's token, status
// in-progress); a fenced row is not written and its commit is told so
// (the others are written). A statement the server refuses (a row that
// breaks a constraint) writes nothing, and each of its commits is made
// again in a transaction of its own. A job carrying an operator's request, or a
// commit whose mutate set the times itself, is not batched: the
// commit's own transaction applies pkg/job's rules to it (claim.Commit).

// errNotBatched: the batch did not write this commit (fenced, a request
// travelling with the job, or the row already committed by a call whose
// reply was lost); the commit's own transaction finds out which.
var errNotBatched = errors.New("not written by the batch")

// errClosed: the store was closed while a commit waited.
var errClosed = errors.New("postgres store closed")

// batchMax bounds the rows of one statement.
const batchMax = 256

// sentinel marks the times a batched commit takes from the database's
// clock (updated_at always, finished_at when the commit sets it).
var sentinel = time.Unix(1, 0).UTC()

type commitReq struct {
	c           *claim
	nj          *job.Job
	finishedNow bool
	res         chan commitRes // buffered: a caller that gave up is not waited for
}

type commitRes struct {
	now time.Time
	err error
}

// batcher gathers requests of one kind (commits, request checks) and
// hands them to flush in batches, one batch at a time: whatever arrived
// while a batch was being written goes in the next one.
type batcher[R any] struct {
	flush func([]R)
	fail  func(R) // the store was closed

	mu      sync.Mutex
	started bool
	closed  bool
	queue   []R
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	gather  int          // tests: a batch waits until this many requests are queued
	batches atomic.Int64 // batches flushed (tests)
}

func newBatcher[R any](flush func([]R), fail func(R)) *batcher[R] {
	return &batcher[R]{flush: flush, fail: fail, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// add queues r for the next batch; false when the store is closed.
func (b *batcher[R]) add(r R) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	if !b.started {
		b.started = true
		go b.run()
	}
	b.queue = append(b.queue, r)
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
	return true
}

func (b *batcher[R]) run() {
	defer close(b.done)
	for {
		select {
		case <-b.kick:
		case <-b.stop:
			b.failAll()
			return
		}
		b.mu.Lock()
		wait := len(b.queue) < b.gather
		b.mu.Unlock()
		if wait {
			continue
		}
		for {
			b.mu.Lock()
			n := min(len(b.queue), batchMax)
			batch := b.queue[:n:n]
			b.queue = b.queue[n:]
			b.mu.Unlock()
			if n == 0 {
				break
			}
			b.batches.Add(1)
			b.flush(batch)
		}
	}
}

func (b *batcher[R]) failAll() {
	b.mu.Lock()
	q := b.queue
	b.queue = nil
	b.mu.Unlock()
	for _, r := range q {
		b.fail(r)
	}
}

// close stops the batcher; requests still queued fail.
func (b *batcher[R]) close() {
	b.mu.Lock()
	started := b.started
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	if started {
		<-b.done
	}
}

// commit hands r to the next batch of commits and waits for its outcome.
func (s *Store) commit(ctx context.Context, r *commitReq) (time.Time, error) {
	if !s.commits.add(r) {
		return time.Time{}, errClosed
	}
	select {
	case res := <-r.res:
		return res.now, res.err
	case <-ctx.Done():
		// The batch may still write it: a second Commit finds it done.
		return time.Time{}, ctx.Err()
	}
}

// batchSQL writes the outcomes of a batch of commits: each row only while
// it is still its claim's (token, in-progress) and carries no operator's
// request, with lease_until cleared, and its event; queued ones notify.
// It returns each written row's id and the database's now().
const batchSQL = `WITH u AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::int[], $7::timestamptz[],
		$8::text[], $9::text[], $10::text[], $11::timestamptz[], $12::timestamptz[], $13::timestamptz[], $14::bool[],
		$15::int[], $16::text[], $17::text[], $18::bigint[], $19::text[])
	AS u(id, token, status, priority, attempts, max_attempts, not_before, agent, corr, new_token, started, hb,
		finished, finished_now, exit, reason, error, dropped, actor)
), upd AS (
	UPDATE jobs j SET status = u.status, priority = u.priority, attempts = u.attempts, max_attempts = u.max_attempts,
		updated_at = now(), not_before = u.not_before, agent = u.agent, correlation_id = u.corr, claim_token = u.new_token,
		started_at = u.started, last_heartbeat = u.hb, finished_at = CASE WHEN u.finished_now THEN now() ELSE u.finished END,
		exit_code = u.exit, reason = u.reason, error = u.error, output_dropped = u.dropped, control = NULL, lease_until = NULL
	FROM u
	WHERE j.id = u.id AND j.claim_token = u.token AND j.status = 'in-progress' AND j.control IS NULL
	RETURNING j.id, j.status, j.attempts, j.reason, j.correlation_id, j.updated_at, u.actor
), ev AS (
	INSERT INTO job_events (job_id, time, actor, from_state, to_state, attempt, reason, correlation_id)
	SELECT id, updated_at, actor, 'in-progress', status, attempts, reason, correlation_id FROM upd
)
SELECT id, updated_at, (SELECT count(*) FROM (SELECT pg_notify('` + NotifyChannel + `', '') FROM upd
	WHERE status = 'queued' LIMIT 1) AS n) FROM upd`

// flush writes one batch and tells each commit its outcome. A failed
// statement (a cut connection) wrote nothing: every commit of the batch
// gets the error, and may be called again.
func (s *Store) flushCommits(batch []*commitReq) {
	n := len(batch)
	// In ID order: concurrent writers lock rows in one order.
	slices.SortFunc(batch, func(x, y *commitReq) int { return strings.Compare(x.nj.ID, y.nj.ID) })
	ids, tokens, sts, agents, corrs, newTokens := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	reasons, errs, actors := make([]string, n), make([]string, n), make([]string, n)
	prio, att, maxAtt, exits := make([]int32, n), make([]int32, n), make([]int32, n), make([]*int32, n)
	notBefore, started, hb, finished := make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
	finNow, dropped := make([]bool, n), make([]int64, n)
	for i, r := range batch {
		j := r.nj
		ids[i], tokens[i], sts[i], agents[i], corrs[i], newTokens[i] = j.ID, r.c.token, string(j.Status), j.Agent, j.CorrelationID, j.ClaimToken
		reasons[i], errs[i], actors[i] = j.Reason, j.Error, r.c.holder.Actor
		prio[i], att[i], maxAtt[i] = int32(j.Priority), int32(j.Attempts), int32(j.MaxAttempts)
		if j.ExitCode != nil {
			e := int32(*j.ExitCode)
			exits[i] = &e
		}
		notBefore[i], started[i], hb[i] = j.NotBefore, j.StartedAt, j.LastHeartbeat
		finNow[i] = r.finishedNow
		if !r.finishedNow {
			finished[i] = j.FinishedAt
		}
		dropped[i] = j.OutputDropped
	}
	if h := s.testHookBeforeCommit; h != nil {
		h("commit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(map[string]time.Time, n)
	rows, err := s.pool.Query(ctx, batchSQL, ids, tokens, sts, prio, att, maxAtt, notBefore, agents, corrs, newTokens,
		started, hb, finished, finNow, exits, reasons, errs, dropped, actors)
	if err == nil {
		for rows.Next() {
			var id string
			var now time.Time
			var notified int64
			if err = rows.Scan(&id, &now, &notified); err != nil {
				break
			}
			done[id] = now.UTC()
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if refusedRow(err) {
		// The server refused the statement for a row's data (nothing
		// of it applied): each commit is made again in its own
		// transaction and gets its own answer.
		err = nil
		clear(done)
	}
	for _, r := range batch {
		switch now, ok := done[r.nj.ID]; {
		case err != nil:
			r.res <- commitRes{err: mapErr(err)}
		case ok:
			r.res <- commitRes{now: now}
		default:
			r.res <- commitRes{err: errNotBatched}
		}
	}
}

// refusedRow says whether err is the server refusing a statement for
// the data of a row (a data exception, a constraint, the transitions
// trigger), not a failure of the connection or the server.
func refusedRow(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == "FR001" || strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")
}
