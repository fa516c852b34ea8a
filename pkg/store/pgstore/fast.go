package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// claimFastSQL claims up to $2 queued jobs in one statement (one round
// trip, one commit): the best due jobs are locked (FOR UPDATE SKIP
// LOCKED), made in-progress with the tokens and correlation suffixes of
// $4 and $5 (random, from Go), their events written and their prompts
// returned. If one of the picked jobs carries an operator's request,
// nothing is changed and the statement returns those jobs instead
// (claimed = false): the caller claims in claimSlow, which applies the
// request as pkg/job's rules say.
const claimFastSQL = `WITH pick AS (
	SELECT id, control IS NOT NULL AS asked FROM jobs
	WHERE status = 'queued' AND (not_before IS NULL OR not_before <= now())
	AND ($1::text[] IS NULL OR kind = ANY($1))
	AND (jobs.kind || '') <> ALL (ARRAY(SELECT kind FROM paused_kinds)) -- one look at paused_kinds per statement (pausedTest)
	ORDER BY priority DESC, age_key, id LIMIT $2 FOR UPDATE SKIP LOCKED
), plain AS (
	SELECT id, row_number() OVER () AS n FROM pick WHERE NOT EXISTS (SELECT 1 FROM pick WHERE asked)
), upd AS (
	UPDATE jobs j SET status = 'in-progress', attempts = j.attempts + 1, agent = $3,
		correlation_id = j.id || '/' || (j.attempts + 1)::text || '-' || t.sfx, claim_token = t.token,
		started_at = now(), last_heartbeat = now(), lease_until = now() + $6::interval, updated_at = now(),
		finished_at = NULL, exit_code = NULL, reason = '', error = '', not_before = NULL, output_dropped = 0,
		control = NULL, handler = NULL
	FROM plain p JOIN unnest($4::text[], $5::text[]) WITH ORDINALITY AS t(token, sfx, n) ON t.n = p.n
	WHERE j.id = p.id AND j.status = 'queued'
	RETURNING ` + "j.prompt, j.id, j.schema_version, j.kind, j.status, j.priority, j.attempts, j.max_attempts, j.created_at, j.updated_at, " +
	"j.not_before, j.agent, j.correlation_id, j.claim_token, j.started_at, j.last_heartbeat, j.finished_at, j.exit_code, " +
	"j.reason, j.error, j.output_dropped, j.control" + `
), ev AS (
	INSERT INTO job_events (job_id, time, actor, from_state, to_state, attempt, correlation_id)
	SELECT id, started_at, $7, 'queued', 'in-progress', attempts, correlation_id FROM upd
)
SELECT true, upd.* FROM upd
UNION ALL
SELECT false, prompt, ` + jobCols + ` FROM jobs WHERE id IN (SELECT id FROM pick WHERE asked)`

// claimPlanSQL fixes the claim statement's plan, whatever the table's
// statistics say: it runs just before the claim, in the same implicit
// transaction (one batch: one round trip), and its settings end with that
// transaction. The claim must read jobs_claim_order in its order and stop
// at its LIMIT, and reach each picked row by its key: a few index entries,
// whatever the queue's depth. The planner chose that only while its
// statistics said the queue was deep; after a burst of submits into a
// queue that was short (the statistics lag until autovacuum analyzes the
// table), it believed a dozen jobs were queued, read every queued job by
// a bitmap scan and sorted them, and joined the update to a scan of every
// queued job, at every claim: 0.6 ms of the database's CPU per job in a
// burn-down of 5000 jobs submitted at once, seconds a claim after a burst
// of a million. Without sorts, bitmap scans and hash joins, the ordered
// index scan and key lookups are the only plans left
// (TestClaimAfterABurstReadsTheIndexHead).
const claimPlanSQL = `SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true),
	set_config('enable_hashjoin', 'off', true)`

// claimFast is Claim's common case in one statement (claimFastSQL). slow
// says that a picked job carries an operator's request: nothing was
// claimed, and claimSlow must.
func (s *Store) claimFast(ctx context.Context, h job.Holder, kinds []string, max int, lease time.Duration) ([]store.Claim, bool, error) {
	tokens, sfx := make([]string, max), make([]string, max)
	for i := range tokens {
		tokens[i], sfx[i] = randHex(8), randHex(3)
	}
	if s.testHookBeforeCommit != nil {
		s.testHookBeforeCommit("claim")
	}
	// One round trip, one transaction: the claim's planner settings
	// (claimPlanSQL), then the claim.
	b := &pgx.Batch{}
	b.Queue(claimPlanSQL)
	b.Queue(claimFastSQL, nonEmpty(kinds), max, h.Agent, tokens, sfx, lease, h.Actor)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, false, mapErr(err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, false, mapErr(err)
	}
	defer rows.Close()
	var out []store.Claim
	slow := false
	for rows.Next() {
		var claimed bool
		var prompt []byte
		j, _, err := scanJob(rows, &claimed, &prompt)
		if err != nil {
			return nil, false, mapErr(err)
		}
		if !claimed {
			slow = true
			continue
		}
		out = append(out, &claim{s: s, holder: h, lease: lease, token: j.ClaimToken, j: j, prompt: prompt})
	}
	if err := rows.Err(); err != nil {
		return nil, false, mapErr(err)
	}
	return out, slow, nil
}
