package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/pkg/job"
)

// FeedEvent is one row of job_events with its job's kind ("" when the
// job was removed meanwhile).
type FeedEvent struct {
	Seq   int64
	JobID string
	Kind  string
	job.Event
}

// FeedFilter narrows the events: one job's, and those at or after Since.
type FeedFilter struct {
	Job   string
	Since time.Time
}

const eventCols = `e.seq, e.job_id, coalesce(j.kind, ''), e.time, e.actor, e.from_state, e.to_state, e.attempt, e.reason, e.correlation_id`

// where is the WHERE part of f, its parameters appended to args.
func (f FeedFilter) where(args []any) (string, []any) {
	sql := ""
	if f.Job != "" {
		args = append(args, f.Job)
		sql += fmt.Sprintf(" AND e.job_id = $%d", len(args))
	}
	if !f.Since.IsZero() {
		args = append(args, f.Since)
		sql += fmt.Sprintf(" AND e.time >= $%d", len(args))
	}
	return sql, args
}

func scanFeed(rows pgx.Rows) ([]FeedEvent, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (FeedEvent, error) {
		var e FeedEvent
		var from, to string
		err := row.Scan(&e.Seq, &e.JobID, &e.Kind, &e.Time, &e.Actor, &from, &to, &e.Attempt, &e.Reason, &e.CorrelationID)
		e.Time, e.From, e.To = e.Time.UTC(), job.State(from), job.State(to)
		return e, err
	})
}

// Events returns the events f selects that are committed now, in seq
// order (the order their transactions wrote them).
func (s *Store) Events(ctx context.Context, f FeedFilter) ([]FeedEvent, error) {
	where, args := f.where(nil)
	rows, err := s.pool.Query(ctx, `SELECT `+eventCols+` FROM job_events e LEFT JOIN jobs j ON j.id = e.job_id
		WHERE true`+where+` ORDER BY e.seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return scanFeed(rows)
}

// Feed follows job_events: each Next returns the events committed since
// the previous one, each event exactly once, none missed.
//
// seq alone cannot be the cursor: seq is drawn when a row is written, and
// transactions commit in another order, so a row with a smaller seq may
// become visible after a larger one was read. Feed goes by transaction
// instead: every Next takes the horizon H, the oldest transaction still
// running (pg_snapshot_xmin of the current snapshot: every transaction
// before it has ended), and returns the rows written by the transactions
// since the previous horizon (the row's xmin). No transaction below H can
// add a row later. The rows it returns of transactions at or after H
// (committed while an older one still runs: any transaction of the
// server, of any database) are remembered until the horizon passes them,
// so that they are not returned again. To read
// only recent rows, seq bounds the scan from below: a row written by a
// transaction at or after the previous horizon has a seq above the
// sequence's value read before a snapshot whose next transaction id was
// at most that horizon (its transaction id, and so its row, came after
// that snapshot), with a second's margin for a seq drawn just before its
// transaction got its id.
type Feed struct {
	s     *Store
	f     FeedFilter
	hprev int64 // the previous horizon (-1: none yet)
	marks []feedMark
	ahead map[int64]int64 // seq -> transaction of rows returned at or after hprev
}

// feedMark is what one Next saw: the sequence's last value (read first),
// then the next transaction id of a snapshot, with the times of both.
type feedMark struct {
	readAt  time.Time
	last    int64
	xmax    int64
	snapped time.Time
}

// feedMargin: a seq is drawn at most this long before its transaction
// gets its id (the same row's insert).
const feedMargin = time.Second

// Follow starts a Feed of the events f selects: its first Next returns
// the events already committed.
func (s *Store) Follow(f FeedFilter) *Feed {
	return &Feed{s: s, f: f, hprev: -1, ahead: map[int64]int64{}}
}

// Next returns the events committed since the previous Next (the first:
// every event committed), in seq order.
func (fd *Feed) Next(ctx context.Context) ([]FeedEvent, error) {
	var m feedMark
	var called bool
	m.readAt = time.Now()
	if err := fd.s.pool.QueryRow(ctx, `SELECT last_value, is_called FROM `+eventsSeq).Scan(&m.last, &called); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if !called {
		m.last = 0
	}
	var h int64
	if err := fd.s.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint,
		pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&h, &m.xmax); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	m.snapped = time.Now()
	floor := fd.floor()
	// A row's xmin is a 32-bit transaction id: made a full one by its
	// distance to the horizon, modulo 2^32.
	args := []any{floor, h}
	xid := `($2 + ((((e.xmin::text::bigint - ($2 & 4294967295)) % 4294967296 + 4294967296) % 4294967296 + 2147483648) % 4294967296) - 2147483648)`
	cond := ""
	if fd.hprev >= 0 {
		args = append(args, fd.hprev)
		cond = ` AND ` + xid + ` >= $3`
	}
	where, args := fd.f.where(args)
	rows, err := fd.s.pool.Query(ctx, `SELECT `+xid+`, `+eventCols+` FROM job_events e LEFT JOIN jobs j ON j.id = e.job_id
		WHERE e.seq > $1`+cond+where+` ORDER BY e.seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	var xids []int64
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (FeedEvent, error) {
		var e FeedEvent
		var x int64
		var from, to string
		err := row.Scan(&x, &e.Seq, &e.JobID, &e.Kind, &e.Time, &e.Actor, &from, &to, &e.Attempt, &e.Reason, &e.CorrelationID)
		e.Time, e.From, e.To = e.Time.UTC(), job.State(from), job.State(to)
		xids = append(xids, x)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	// Committed rows of transactions at or after the horizon are returned
	// now, and remembered until the horizon passes them, so that the next
	// Next (which reads from this horizon) skips them.
	out := evs[:0]
	for i, e := range evs {
		if _, done := fd.ahead[e.Seq]; done {
			continue
		}
		if xids[i] >= h {
			fd.ahead[e.Seq] = xids[i]
		}
		out = append(out, e)
	}
	for q, x := range fd.ahead {
		if x < h {
			delete(fd.ahead, q)
		}
	}
	fd.hprev = h
	fd.marks = append(fd.marks, m)
	return out, nil
}

// floor is the seq below which no row of a transaction at or after the
// previous horizon lies (0 when none is known yet), and drops the marks
// no later floor needs.
func (fd *Feed) floor() int64 {
	if fd.hprev < 0 {
		return 0
	}
	j := -1 // the latest snapshot whose next id was at most the horizon
	for i, m := range fd.marks {
		if m.xmax <= fd.hprev {
			j = i
		}
	}
	if j < 0 {
		return 0
	}
	k := -1 // the latest sequence read a margin before that snapshot
	for i := 0; i <= j; i++ {
		if fd.marks[i].readAt.Add(feedMargin).Before(fd.marks[j].snapped) {
			k = i
		}
	}
	if k < 0 {
		return 0
	}
	floor := fd.marks[k].last
	fd.marks = fd.marks[k:]
	return floor
}

// eventsSeq is job_events.seq's identity sequence.
const eventsSeq = `job_events_seq_seq`
