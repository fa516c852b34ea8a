package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// newestPage is how many rows ListNewestFirst reads per query: a
// dashboard's page is tens of rows, most often the first.
const newestPage = 100

// ListNewestFirst is List in the other order: the jobs f selects (its
// States and Kinds; AfterID, FinishedBefore and DueBy are refused),
// newest ID first, from the one just below beforeID ("" : the newest),
// a page at a time on the primary key read backwards. fn's error stops
// the listing and is returned.
func (s *Store) ListNewestFirst(ctx context.Context, f store.Filter, beforeID string, fn func(*job.Job) error) error {
	if f.AfterID != "" || !f.FinishedBefore.IsZero() || !f.DueBy.IsZero() {
		return errors.New("list newest first: only states, kinds and a limit select")
	}
	before, left := beforeID, f.Limit
	for {
		n := newestPage
		if f.Limit > 0 && left < n {
			n = left
		}
		rows, err := s.pool.Query(ctx, `SELECT `+jobCols+` FROM jobs
			WHERE ($1::text[] IS NULL OR status = ANY($1)) AND ($2::text[] IS NULL OR kind = ANY($2))
			AND ($3 = '' OR id < $3)
			ORDER BY id DESC LIMIT $4`, states(f.States), nonEmpty(f.Kinds), before, n)
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
		before = page[len(page)-1].ID
		if f.Limit > 0 {
			if left -= len(page); left <= 0 {
				return nil
			}
		}
	}
}
