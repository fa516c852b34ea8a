package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// oldestQueuedSQL reads the first entry of jobs_queued_created (migration
// 0008): the queued job with the smallest created_at, of those the
// smallest ID.
const oldestQueuedSQL = `SELECT id, created_at FROM jobs WHERE status = 'queued' ORDER BY created_at, id LIMIT 1`

// OldestQueued returns the oldest queued job's ID and created_at: the
// smallest created_at of the queued jobs, of those the smallest ID (what
// farroctl stats and top show, as on a spool). The ID is "" when nothing
// is queued. One index entry is read, however deep the queue.
func (s *Store) OldestQueued(ctx context.Context) (id string, created time.Time, err error) {
	err = s.pool.QueryRow(ctx, oldestQueuedSQL).Scan(&id, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("oldest queued job: %w", err)
	}
	return id, created.UTC(), nil
}
