package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

var _ store.Importer = (*Store)(nil)

// Import implements store.Importer: the job row (its fields as given, no
// lease, no control request, no handler) and its events are inserted in
// one transaction, which notifies NotifyChannel when the job is queued.
// Times are kept to the microsecond, the database's precision.
func (s *Store) Import(ctx context.Context, rec store.ImportRecord) (store.ImportResult, error) {
	j, hist, err := checkImport(rec)
	if err != nil {
		return 0, err
	}
	var res store.ImportResult
	err = s.tx(ctx, func(tx pgx.Tx) error {
		var exit *int32
		if j.ExitCode != nil {
			e := int32(*j.ExitCode)
			exit = &e
		}
		tag, err := tx.Exec(ctx, `INSERT INTO jobs (id, schema_version, kind, status, priority, attempts, max_attempts,
			created_at, updated_at, not_before, agent, correlation_id, claim_token, started_at, last_heartbeat,
			finished_at, exit_code, reason, error, output_dropped, prompt, age_key)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)
			ON CONFLICT (id) DO NOTHING`,
			j.ID, j.SchemaVersion, j.Kind, string(j.Status), j.Priority, j.Attempts, j.MaxAttempts, j.CreatedAt,
			j.UpdatedAt, j.NotBefore, j.Agent, j.CorrelationID, j.ClaimToken, j.StartedAt, j.LastHeartbeat,
			j.FinishedAt, exit, j.Reason, j.Error, j.OutputDropped, []byte(rec.Prompt), ageOf(j))
		if err != nil {
			return mapErr(err)
		}
		if tag.RowsAffected() == 0 {
			res = store.ImportSame
			return sameAsStored(ctx, tx, j, rec.Prompt, hist)
		}
		res = store.Imported
		for _, ev := range hist {
			if err := addEvent(ctx, tx, j.ID, ev); err != nil {
				return err
			}
		}
		if j.Status == job.Queued {
			return notify(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("import %s: %w", j.ID, err)
	}
	return res, nil
}

// checkImport validates rec as a submit would (ID, kind, prompt) plus
// its lifecycle, and returns its job and history with their times in UTC
// to the microsecond.
func checkImport(rec store.ImportRecord) (*job.Job, []job.Event, error) {
	if rec.Job == nil {
		return nil, nil, fmt.Errorf("import: %w: no job", store.ErrImportRefused)
	}
	j := rec.Job.Clone()
	fail := func(format string, args ...any) (*job.Job, []job.Event, error) {
		return nil, nil, fmt.Errorf("import %s: %w: %s", j.ID, store.ErrImportRefused, fmt.Sprintf(format, args...))
	}
	if err := job.ValidateID(j.ID); err != nil {
		return nil, nil, fmt.Errorf("import: %w: %w", store.ErrImportRefused, err)
	}
	switch {
	case j.SchemaVersion != job.SchemaVersion:
		return nil, nil, fmt.Errorf("import %s: %w: %w: %q (this build understands %q)", j.ID, store.ErrImportRefused, job.ErrSchema, j.SchemaVersion, job.SchemaVersion)
	case !j.Status.Valid():
		return fail("unknown state %q", j.Status)
	case j.Status == job.InProgress:
		return fail("an in-progress job cannot be imported: its claim belongs to where it runs (import it as stale)")
	case !job.ValidKind(j.Kind):
		return fail("invalid kind %q: must match %s", j.Kind, job.KindPattern)
	case j.Attempts < 0 || j.MaxAttempts < 0 || j.OutputDropped < 0:
		return fail("negative attempts, max_attempts or output_dropped")
	case j.CreatedAt.IsZero() || j.UpdatedAt.IsZero():
		return fail("no created_at or updated_at")
	case len(rec.Prompt) > job.MaxPromptSize:
		return fail("prompt is %d bytes, over the limit of %d", len(rec.Prompt), job.MaxPromptSize)
	case !json.Valid(rec.Prompt):
		return fail("prompt is not valid JSON")
	}
	normJob(j)
	hist := make([]job.Event, len(rec.History))
	for i, ev := range rec.History {
		if !ev.To.Valid() || (ev.From != "" && !ev.From.Valid()) {
			return fail("event %d: unknown state in %q -> %q", i+1, ev.From, ev.To)
		}
		ev.Time = micro(ev.Time)
		hist[i] = ev
	}
	return j, hist, nil
}

// micro is t as the database keeps it: UTC, to the microsecond.
func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func normJob(j *job.Job) {
	j.CreatedAt, j.UpdatedAt = micro(j.CreatedAt), micro(j.UpdatedAt)
	for _, t := range []**time.Time{&j.NotBefore, &j.StartedAt, &j.LastHeartbeat, &j.FinishedAt} {
		if *t != nil {
			u := micro(**t)
			*t = &u
		}
	}
}

// sameAsStored compares the stored job id with what an import would
// have written: nil when equal, else an error wrapping job.ErrDuplicate
// naming what differs.
func sameAsStored(ctx context.Context, tx pgx.Tx, j *job.Job, prompt []byte, hist []job.Event) error {
	var p []byte
	cur, _, err := scanJob(tx.QueryRow(ctx, `SELECT prompt, `+jobCols+` FROM jobs WHERE id = $1`, j.ID), &p)
	if err != nil {
		return err
	}
	var diff []string
	a, b := fieldsOf(cur), fieldsOf(j)
	for k := range a {
		if !bytes.Equal(a[k], b[k]) {
			diff = append(diff, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			diff = append(diff, k)
		}
	}
	sort.Strings(diff)
	if !bytes.Equal(p, prompt) {
		diff = append(diff, "prompt")
	}
	stored, err := historyTx(ctx, tx, j.ID)
	if err != nil {
		return err
	}
	if !sameEvents(stored, hist) {
		diff = append(diff, "history")
	}
	if len(diff) > 0 {
		return fmt.Errorf("%w with other content (%s; stored: %s, attempts %d)", job.ErrDuplicate,
			strings.Join(diff, ", "), cur.Status, cur.Attempts)
	}
	return nil
}

// fieldsOf is j's job.json fields, each as its JSON.
func fieldsOf(j *job.Job) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	b, _ := json.Marshal(j)
	_ = json.Unmarshal(b, &m)
	return m
}

func sameEvents(a, b []job.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !x.Time.Equal(y.Time) {
			return false
		}
		x.Time, y.Time = time.Time{}, time.Time{}
		if x != y {
			return false
		}
	}
	return true
}

// historyTx is History inside tx.
func historyTx(ctx context.Context, tx pgx.Tx, id string) ([]job.Event, error) {
	rows, err := tx.Query(ctx, `SELECT time, actor, from_state, to_state, attempt, reason, correlation_id
		FROM job_events WHERE job_id = $1 ORDER BY seq`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var evs []job.Event
	for rows.Next() {
		var ev job.Event
		var from, to string
		if err := rows.Scan(&ev.Time, &ev.Actor, &from, &to, &ev.Attempt, &ev.Reason, &ev.CorrelationID); err != nil {
			return nil, err
		}
		ev.Time, ev.From, ev.To = ev.Time.UTC(), job.State(from), job.State(to)
		evs = append(evs, ev)
	}
	return evs, rows.Err()
}
