package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PausedKind is a queue-wide pause of a kind (the paused_kinds table):
// no claim takes a queued job of that kind until it is resumed.
type PausedKind struct {
	Kind     string
	PausedAt time.Time
	By       string // the actor, e.g. farroctl
	User     string // the operator's login
	Host     string
	PID      int
	Reason   string
}

// PauseKind pauses p.Kind (at the database's now). A kind already paused
// keeps its paused_at and takes the new reason and operator; prev is then
// the pause's start, else nil.
func (s *Store) PauseKind(ctx context.Context, p PausedKind) (prev *time.Time, err error) {
	var was *time.Time
	err = s.pool.QueryRow(ctx, `WITH old AS (SELECT paused_at FROM paused_kinds WHERE kind = $1)
		INSERT INTO paused_kinds (kind, paused_by, os_user, host, pid, reason) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (kind) DO UPDATE SET paused_by = EXCLUDED.paused_by, os_user = EXCLUDED.os_user,
			host = EXCLUDED.host, pid = EXCLUDED.pid, reason = EXCLUDED.reason
		RETURNING (SELECT paused_at FROM old)`, p.Kind, p.By, p.User, p.Host, p.PID, p.Reason).Scan(&was)
	if err != nil {
		return nil, fmt.Errorf("pause %s: %w", p.Kind, err)
	}
	return was, nil
}

// ResumeKind ends the pause of kind, and wakes the agents waiting for
// queued jobs (its jobs are claimable again). was: it was paused.
func (s *Store) ResumeKind(ctx context.Context, kind string) (was bool, err error) {
	var k string
	err = s.pool.QueryRow(ctx, `WITH d AS (DELETE FROM paused_kinds WHERE kind = $1 RETURNING kind)
		SELECT kind FROM d, pg_notify('`+NotifyChannel+`', '')`, kind).Scan(&k)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("resume %s: %w", kind, err)
	}
	return true, nil
}

// PausedKinds lists the paused kinds, by kind.
func (s *Store) PausedKinds(ctx context.Context) ([]PausedKind, error) {
	rows, err := s.pool.Query(ctx, `SELECT kind, paused_at, paused_by, os_user, host, pid, reason FROM paused_kinds ORDER BY kind`)
	if err != nil {
		return nil, fmt.Errorf("paused kinds: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (PausedKind, error) {
		var p PausedKind
		err := row.Scan(&p.Kind, &p.PausedAt, &p.By, &p.User, &p.Host, &p.PID, &p.Reason)
		p.PausedAt = p.PausedAt.UTC()
		return p, err
	})
}
