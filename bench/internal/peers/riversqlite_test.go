package peers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRiverSQLiteDurableSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "river.db")
	r, err := NewRiverSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(s.JournalMode, "wal") || s.Synchronous != 2 || s.BusyTimeout != SQLiteBusyTimeout {
		t.Fatalf("settings %+v, want WAL, synchronous 2 (FULL), busy_timeout %s", s, SQLiteBusyTimeout)
	}
	// The database is the file asked for, with its write-ahead log beside it.
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

func TestRiverSQLiteRefusesWeakerSettings(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "river.db")
	dsn, err := SQLiteDSN(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, weak := range []string{
		strings.Replace(dsn, "synchronous(FULL)", "synchronous(NORMAL)", 1),
		strings.Replace(dsn, "journal_mode(WAL)", "journal_mode(DELETE)", 1),
		strings.Replace(dsn, "busy_timeout(10000)", "busy_timeout(0)", 1),
	} {
		if weak == dsn {
			t.Fatalf("DSN %q lacks a setting the test replaces", dsn)
		}
		r, err := openRiverSQLite(context.Background(), path, weak)
		if err == nil {
			r.Close()
			t.Fatalf("%s: opened, want refused", weak)
		}
		if !strings.Contains(err.Error(), "want wal, 2 (FULL)") {
			t.Fatalf("%s: err = %v", weak, err)
		}
	}
}

func TestRiverSQLiteBadPath(t *testing.T) {
	t.Parallel()
	_, err := NewRiverSQLite(context.Background(), filepath.Join(t.TempDir(), "a?b.db"))
	if err == nil || !strings.Contains(err.Error(), "'?'") {
		t.Fatalf("err = %v, want one about the '?'", err)
	}
}

func TestRiverSQLiteFigures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, err := NewRiverSQLite(ctx, filepath.Join(t.TempDir(), "river.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	if _, err := r.InsertOne(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if n := r.count(t, "SELECT count(*) FROM river_job"); n != 10 {
		t.Fatalf("after InsertOne(10): %d jobs", n)
	}
	if _, err := r.InsertMany(ctx, 30); err != nil {
		t.Fatal(err)
	}
	if n := r.count(t, "SELECT count(*) FROM river_job"); n != 30 {
		t.Fatalf("after InsertMany(30): %d jobs (the table is emptied first)", n)
	}

	el, err := r.BurnDown(ctx, RiverTuned, 20, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if el <= 0 {
		t.Fatalf("burn-down took %s", el)
	}
	if n := r.count(t, "SELECT count(*) FROM river_job WHERE state = 'completed'"); n != 20 {
		t.Fatalf("after BurnDown(20): %d completed", n)
	}

	lat, err := r.Pickup(ctx, RiverTuned, 2)
	if err != nil {
		t.Fatal(err)
	}
	if lat.N != 2 || lat.P50 <= 0 || lat.P99 < lat.P50 || lat.P99 > 30*time.Second {
		t.Fatalf("pickup %+v", lat)
	}
}

func (r *RiverSQLite) count(t *testing.T, q string) int {
	t.Helper()
	var n int
	if err := r.sql.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
