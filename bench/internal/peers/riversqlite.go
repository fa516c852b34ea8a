package peers

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/riverqueue/river/riverdriver/riversqlite"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", pure Go

	"github.com/farro-dev/farro/bench/internal/stats"
)

// SQLiteBusyTimeout is how long a connection waits for SQLite's write lock
// before it fails with SQLITE_BUSY.
const SQLiteBusyTimeout = 10 * time.Second

// RiverSQLite is River on an embedded SQLite database file (riversqlite
// with the pure-Go modernc.org/sqlite driver): WAL, synchronous=FULL (the
// WAL is fsynced at every commit, so an acknowledged insert survives a
// power cut), busy_timeout set. The pool has one connection, as River's
// SQLite driver recommends: SQLite allows one writer at a time, and River's
// concurrent internal operations would otherwise meet SQLITE_BUSY.
type RiverSQLite struct {
	Path string
	sql  *sql.DB
	db   riverDB[*sql.Tx]
}

// SQLiteDSN is the data source name of the database file at path.
func SQLiteDSN(path string) (string, error) {
	if strings.ContainsAny(path, "?#") {
		return "", fmt.Errorf("sqlite: path %q has a '?' or '#'", path)
	}
	return fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)",
		path, SQLiteBusyTimeout.Milliseconds()), nil
}

// NewRiverSQLite creates (or opens) the database file at path, checks
// that the durable settings are in effect and runs River's migrations.
func NewRiverSQLite(ctx context.Context, path string) (*RiverSQLite, error) {
	dsn, err := SQLiteDSN(path)
	if err != nil {
		return nil, err
	}
	return openRiverSQLite(ctx, path, dsn)
}

// openRiverSQLite opens path through dsn and refuses a database whose
// settings are not the durable ones.
func openRiverSQLite(ctx context.Context, path, dsn string) (*RiverSQLite, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	r := &RiverSQLite{Path: path, sql: db}
	if err := r.checkSettings(ctx); err != nil {
		db.Close()
		return nil, err
	}
	drv := riversqlite.New(db)
	if err := migrate(ctx, drv); err != nil {
		db.Close()
		return nil, err
	}
	r.db = riverDB[*sql.Tx]{
		name:   "river sqlite",
		driver: drv,
		reset: func(ctx context.Context) error {
			_, err := db.ExecContext(ctx, "DELETE FROM river_job")
			return err
		},
		done: func(ctx context.Context) (int, error) {
			var n int
			err := db.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n)
			return n, err
		},
	}
	return r, nil
}

// Settings are the connection's journal_mode, synchronous level (2 is
// FULL) and busy_timeout, as SQLite reports them.
type Settings struct {
	JournalMode string
	Synchronous int
	BusyTimeout time.Duration
}

// Settings reads the settings back from the database.
func (r *RiverSQLite) Settings(ctx context.Context) (Settings, error) {
	var s Settings
	var busyMs int64
	if err := r.sql.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&s.JournalMode); err != nil {
		return s, fmt.Errorf("sqlite: PRAGMA journal_mode: %w", err)
	}
	if err := r.sql.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&s.Synchronous); err != nil {
		return s, fmt.Errorf("sqlite: PRAGMA synchronous: %w", err)
	}
	if err := r.sql.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busyMs); err != nil {
		return s, fmt.Errorf("sqlite: PRAGMA busy_timeout: %w", err)
	}
	s.BusyTimeout = time.Duration(busyMs) * time.Millisecond
	return s, nil
}

func (r *RiverSQLite) checkSettings(ctx context.Context) error {
	s, err := r.Settings(ctx)
	if err != nil {
		return err
	}
	if !strings.EqualFold(s.JournalMode, "wal") || s.Synchronous != 2 || s.BusyTimeout != SQLiteBusyTimeout {
		return fmt.Errorf("sqlite %s: journal_mode=%s synchronous=%d busy_timeout=%s, want wal, 2 (FULL), %s",
			r.Path, s.JournalMode, s.Synchronous, s.BusyTimeout, SQLiteBusyTimeout)
	}
	return nil
}

// Close closes the database (River's clients are stopped by then).
func (r *RiverSQLite) Close() { r.sql.Close() }

// Remove closes the database and removes its file, WAL and shared-memory
// index.
func (r *RiverSQLite) Remove() {
	r.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(r.Path + suffix)
	}
}

// BurnDown inserts n jobs (InsertMany), then starts a client and times
// until all n are completed in the database (polled every 10 ms).
func (r *RiverSQLite) BurnDown(ctx context.Context, t RiverTuning, n int, timeout time.Duration) (time.Duration, error) {
	return r.db.burnDown(ctx, t, n, timeout)
}

// InsertOne times n sequential Client.Insert calls (a transaction each).
func (r *RiverSQLite) InsertOne(ctx context.Context, n int) (time.Duration, error) {
	return r.db.insertOne(ctx, n)
}

// InsertMany times inserting n jobs with InsertMany in batches of 1000.
func (r *RiverSQLite) InsertMany(ctx context.Context, n int) (time.Duration, error) {
	return r.db.insertMany(ctx, n)
}

// Pickup times Insert (start) to Work (start) on an idle queue.
func (r *RiverSQLite) Pickup(ctx context.Context, t RiverTuning, probes int) (stats.Latency, error) {
	return r.db.pickup(ctx, t, probes)
}
