package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// newestPage is how many rows ListNewestFirst reads per query: a
// dashboard's page is tens of rows, most often the first.
const newestPage = 100

// ListNewestFirst is List in the other order: the jobs f selects (its
// States and Kinds; AfterID, FinishedBefore, DueBy and ByFinished are
// refused), newest ID first, from the one just below beforeID ("" : the
// newest), a page at a time on the primary key read backwards. fn's
// error stops the listing and is returned.
func (s *Store) ListNewestFirst(ctx context.Context, f store.Filter, beforeID string, fn func(*job.Job) error) error {
	if f.AfterID != "" || !f.FinishedBefore.IsZero() || !f.DueBy.IsZero() || f.ByFinished {
		return errors.New("list newest first: only states, kinds and a limit select")
	}
	return listPages(newestPage, f.Limit, func(last *job.Job, n int) (pgx.Rows, error) {
		before := beforeID
		if last != nil {
			before = last.ID
		}
		return s.pool.Query(ctx, `SELECT `+jobCols+` FROM jobs
			WHERE ($1::text[] IS NULL OR status = ANY($1)) AND ($2::text[] IS NULL OR kind = ANY($2))
			AND ($3 = '' OR id < $3)
			ORDER BY id DESC LIMIT $4`, states(f.States), nonEmpty(f.Kinds), before, n)
	}, fn)
}
