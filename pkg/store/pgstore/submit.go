package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/pkg/job"
)

// submitSQL inserts a batch of submitted jobs and their first events in
// one statement, each as Submit's rules say (held, deferred while its
// not_before is after the database's now(), else queued), skipping an id
// that is there already (and a repeat within the batch); queued jobs
// notify NotifyChannel. It returns the inserted rows.
const submitSQL = `WITH r AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::bool[], $6::timestamptz[], $7::bytea[],
		$8::timestamptz[], $9::text[], $10::int[])
	AS r(id, kind, priority, max_attempts, held, nb, prompt, idage, actor, ord)
), s AS (
	SELECT r.*, CASE WHEN held THEN 'held' WHEN nb > now() THEN 'deferred' ELSE 'queued' END AS status FROM r
), ins AS (
	INSERT INTO jobs (id, schema_version, kind, status, priority, max_attempts, created_at, updated_at, not_before,
		reason, prompt, age_key)
	SELECT id, $11, kind, status, priority, max_attempts, now(), now(), CASE WHEN status = 'deferred' THEN nb END,
		CASE status WHEN 'held' THEN 'submitted held' WHEN 'deferred' THEN 'scheduled' ELSE '' END,
		prompt, coalesce(idage, now())
	FROM s ORDER BY ord
	ON CONFLICT (id) DO NOTHING
	RETURNING id, status, not_before, reason, created_at
), ev AS (
	INSERT INTO job_events (job_id, time, actor, to_state, reason)
	SELECT i.id, i.created_at, a.actor, i.status, 'submitted'
	FROM ins i JOIN (SELECT DISTINCT ON (id) id, actor, ord FROM r ORDER BY id, ord) a ON a.id = i.id
	ORDER BY a.ord
)
SELECT id, status, not_before, reason, created_at, (SELECT count(*) FROM (SELECT pg_notify('` + NotifyChannel + `', '')
	FROM ins WHERE status = 'queued' LIMIT 1) AS n) FROM ins`

// submitChunk bounds the prompt bytes of one statement (a batch of
// larger prompts is several statements in one transaction).
const submitChunk = 8 << 20

type rowQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// submit inserts the valid requests of reqs (errs[i] == nil): one
// statement, or one transaction of several for large prompts. It fills
// jobs, and errs for ids that exist already.
func (s *Store) submit(ctx context.Context, reqs []job.SubmitRequest, jobs []*job.Job, errs []error) error {
	var chunks [][]int
	var cur []int
	size := 0
	for i := range reqs {
		if errs[i] != nil {
			continue
		}
		if len(cur) > 0 && (size+len(reqs[i].Prompt) > submitChunk || len(cur) >= 10000) {
			chunks, cur, size = append(chunks, cur), nil, 0
		}
		cur, size = append(cur, i), size+len(reqs[i].Prompt)
	}
	chunks = append(chunks, cur)
	first := map[string]int{} // each id's first request: a repeat is a duplicate
	run := func(q rowQuerier) error {
		for _, ch := range chunks {
			if err := s.submitRows(ctx, q, reqs, ch, jobs, first); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if len(chunks) == 1 {
		err = mapErr(run(s.pool))
	} else {
		err = s.tx(ctx, func(tx pgx.Tx) error { return run(tx) })
	}
	if err != nil {
		return err
	}
	for _, ch := range chunks {
		for _, i := range ch {
			if jobs[i] == nil {
				errs[i] = fmt.Errorf("submit %s: %w", reqs[i].ID, job.ErrDuplicate)
			}
		}
	}
	return nil
}

func (s *Store) submitRows(ctx context.Context, q rowQuerier, reqs []job.SubmitRequest, idx []int, jobs []*job.Job, first map[string]int) error {
	n := len(idx)
	ids, kinds, actors := make([]string, n), make([]string, n), make([]string, n)
	prio, maxAtt, ord := make([]int32, n), make([]int32, n), make([]int32, n)
	held, nb, idage, prompts := make([]bool, n), make([]*time.Time, n), make([]*time.Time, n), make([][]byte, n)
	for k, i := range idx {
		r := &reqs[i]
		if _, ok := first[r.ID]; !ok {
			first[r.ID] = i
		}
		ids[k], kinds[k], actors[k] = r.ID, r.Kind, r.Actor
		prio[k], maxAtt[k], ord[k] = int32(r.Priority), int32(r.MaxAttempts), int32(k)
		held[k], prompts[k] = r.Held, r.Prompt
		if !r.NotBefore.IsZero() {
			t := r.NotBefore.UTC().Truncate(time.Microsecond)
			nb[k] = &t
		}
		if t, ok := job.IDTime(r.ID); ok {
			idage[k] = &t
		}
	}
	rows, err := q.Query(ctx, submitSQL, ids, kinds, prio, maxAtt, held, nb, prompts, idage, actors, ord, job.SchemaVersion)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, status, reason string
		var notBefore *time.Time
		var created time.Time
		var notified int64
		if err := rows.Scan(&id, &status, &notBefore, &reason, &created, &notified); err != nil {
			return err
		}
		i, ok := first[id]
		if !ok {
			continue
		}
		r := &reqs[i]
		created = created.UTC()
		if notBefore != nil {
			t := notBefore.UTC()
			notBefore = &t
		}
		jobs[i] = &job.Job{SchemaVersion: job.SchemaVersion, ID: id, Kind: r.Kind, Status: job.State(status),
			Priority: r.Priority, MaxAttempts: r.MaxAttempts, CreatedAt: created, UpdatedAt: created,
			NotBefore: notBefore, Reason: reason}
	}
	return rows.Err()
}
