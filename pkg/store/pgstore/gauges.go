package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/pkg/job"
)

// Gauges are the queue's figures that a spool's metrics export, read
// from one snapshot of the database: the jobs per state (every state,
// zeros included), the queued jobs per kind, and the created_at of the
// oldest queued job (zero when none).
type Gauges struct {
	At           time.Time // the database's clock
	States       map[job.State]int
	QueuedKinds  map[string]int
	OldestQueued time.Time
}

// Gauges reads the figures in one read-only transaction: a count by
// state, and the queued jobs by kind with their oldest created_at (the
// claim index's partial range: as many rows as are queued).
func (s *Store) Gauges(ctx context.Context) (Gauges, error) {
	g := Gauges{States: make(map[job.State]int, len(job.States)), QueuedKinds: map[string]int{}}
	for _, st := range job.States {
		g.States[st] = 0
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return g, fmt.Errorf("gauges: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&g.At); err != nil {
		return g, fmt.Errorf("gauges: %w", err)
	}
	g.At = g.At.UTC()
	rows, err := tx.Query(ctx, `SELECT status, count(*) FROM jobs GROUP BY status`)
	if err != nil {
		return g, fmt.Errorf("gauges: %w", err)
	}
	var st string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error { g.States[job.State(st)] = n; return nil }); err != nil {
		return g, fmt.Errorf("gauges: %w", err)
	}
	var kind string
	var oldest time.Time
	rows, err = tx.Query(ctx, `SELECT kind, count(*), min(created_at) FROM jobs WHERE status = 'queued' GROUP BY kind`)
	if err != nil {
		return g, fmt.Errorf("gauges: %w", err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&kind, &n, &oldest}, func() error {
		g.QueuedKinds[kind] = n
		if g.OldestQueued.IsZero() || oldest.Before(g.OldestQueued) {
			g.OldestQueued = oldest.UTC()
		}
		return nil
	}); err != nil {
		return g, fmt.Errorf("gauges: %w", err)
	}
	return g, nil
}
