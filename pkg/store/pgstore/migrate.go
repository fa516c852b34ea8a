package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one numbered schema change, applied in a transaction of its
// own.
type Migration struct {
	Version int
	Name    string // the file's name, e.g. 0001_jobs.sql
	SQL     string
}

// Migrations returns the schema changes this build knows, in order. Their
// numbers run from 1 without gaps.
func Migrations() []Migration {
	ents, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	var ms []Migration
	for _, e := range ents {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			panic("pgstore: migration file without a number: " + e.Name())
		}
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			panic(err)
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			panic(fmt.Sprintf("pgstore: migrations must be numbered 1, 2, ... without gaps: %s", m.Name))
		}
	}
	return ms
}

// SchemaVersion is the schema version this build knows: the last
// migration's number. Open refuses a database at another version.
func SchemaVersion() int { return len(Migrations()) }

// ErrSchemaNewer: the database's schema is newer than this build knows
// (a newer farro migrated it). Nothing is changed; upgrade farro.
var ErrSchemaNewer = errors.New("database schema is newer than this build knows")

// ErrNotMigrated: the database's schema is older than this build's (or
// absent): run farroctl migrate.
var ErrNotMigrated = errors.New("database schema is not up to date")

// migrationLock is the key of the advisory lock that serialises
// migrators (two farroctl migrate at once apply each migration once).
const migrationLock = 0x6661_7272_6f00 // "farro\0"

// versionTable holds one row per applied migration.
const versionTable = `CREATE TABLE IF NOT EXISTS farro_schema_version (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`

// MigrateResult says what Migrate did.
type MigrateResult struct {
	From, To int      // schema version before and after
	Applied  []string // the migrations applied, by file name
}

// Migrate applies the migrations the database at url lacks, each in one
// transaction with its version row, so that a crash or a cut connection
// leaves the schema at a version it names. Two migrators at once
// serialise on an advisory lock. A database at a newer version than this
// build knows is refused (ErrSchemaNewer) and left alone.
func Migrate(ctx context.Context, url string) (MigrateResult, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return MigrateResult{}, fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close(context.Background())
	return migrate(ctx, conn)
}

func migrate(ctx context.Context, conn *pgx.Conn) (MigrateResult, error) {
	ms := Migrations()
	res := MigrateResult{From: -1}
	for {
		done, err := migrateOne(ctx, conn, ms, &res)
		if err != nil || done {
			return res, err
		}
	}
}

// migrateOne applies the next pending migration, if any, in one
// transaction; done is true when there was none.
func migrateOne(ctx context.Context, conn *pgx.Conn, ms []Migration, res *MigrateResult) (done bool, err error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return false, fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, versionTable); err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	v, err := currentVersion(ctx, tx)
	if err != nil {
		return false, err
	}
	if res.From < 0 {
		res.From = v
	}
	res.To = v
	if v > len(ms) {
		return false, fmt.Errorf("%w: it is at version %d, this build knows up to %d: upgrade farro", ErrSchemaNewer, v, len(ms))
	}
	if v == len(ms) {
		return true, nil
	}
	m := ms[v]
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("migrate: %s: %w", m.Name, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO farro_schema_version (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
		return false, fmt.Errorf("migrate: %s: %w", m.Name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("migrate: %s: %w", m.Name, err)
	}
	res.To = m.Version
	res.Applied = append(res.Applied, m.Name)
	return false, nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// currentVersion is the highest applied migration (0: none), the version
// table being there.
func currentVersion(ctx context.Context, q querier) (int, error) {
	var v int
	if err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM farro_schema_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}

// Status reports the schema version of the database at url (0: never
// migrated) and the version this build knows.
func Status(ctx context.Context, url string) (db, build int, err error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	db, err = dbVersion(ctx, conn)
	return db, SchemaVersion(), err
}

// dbVersion is currentVersion, 0 when the version table does not exist.
func dbVersion(ctx context.Context, q querier) (int, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('farro_schema_version') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	return currentVersion(ctx, q)
}

// checkSchema refuses a database whose schema is not this build's.
func checkSchema(ctx context.Context, q querier) error {
	v, err := dbVersion(ctx, q)
	if err != nil {
		return err
	}
	want := SchemaVersion()
	switch {
	case v > want:
		return fmt.Errorf("%w: it is at version %d, this build knows up to %d: upgrade farro", ErrSchemaNewer, v, want)
	case v == 0:
		return fmt.Errorf("%w: the database has no farro schema: run farroctl migrate --store URL", ErrNotMigrated)
	case v < want:
		return fmt.Errorf("%w: it is at version %d, this build needs %d: run farroctl migrate --store URL", ErrNotMigrated, v, want)
	}
	return nil
}

// pgCode is err's SQLSTATE, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
