// Command pgstat counts what farro on PostgreSQL asks of the database per
// job: a private PostgreSQL with pg_stat_statements preloaded (durability
// settings as the bench's: fsync and synchronous_commit on), farro's real
// daemons on --store, and the statements each phase sent, per job (or per
// second while idle), with their total execution time. It prints one
// Markdown table per phase (docs/POSTGRES.md "Performance" quotes them).
//
//	go run -mod=mod ./cmd/pgstat -n 2000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/bench/internal/farrob"
	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/internal/testpg"
)

func main() {
	n := flag.Int("n", 2000, "noop jobs of the burn-down")
	conc := flag.Int("concurrency", 4, "agentd --concurrency")
	idle := flag.Duration("idle", 5*time.Second, "how long managerd and watchdogd are watched on an idle queue")
	root := flag.String("farro", "..", "farro's checkout (its binaries are built from it)")
	flag.Parse()
	if err := run(*root, *n, *conc, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "pgstat:", err)
		os.Exit(1)
	}
}

func run(root string, n, conc int, idle time.Duration) error {
	work, err := os.MkdirTemp("", "farro-pgstat-")
	if err != nil {
		return err
	}
	defer sys.RemoveTree(work)
	if err := os.Chmod(work, 0o755); err != nil { // as root, postgres runs as the postgres user
		return err
	}
	bins, err := farrob.Build(root, filepath.Join(work, "bin"))
	if err != nil {
		return err
	}
	srv, err := testpg.StartServerWith(filepath.Join(work, "pg"), "shared_preload_libraries=pg_stat_statements",
		"pg_stat_statements.track=all", "pg_stat_statements.track_utility=on")
	if err != nil {
		return err
	}
	defer srv.Stop()
	ctx := context.Background()
	pg := farrob.PG{Admin: srv.URL}
	dbURL, err := pg.NewDatabase(ctx, "farro_stat")
	if err != nil {
		return err
	}
	if err := bins.Migrate(dbURL); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
		return err
	}
	local, logs := filepath.Join(work, "local"), filepath.Join(work, "logs")
	for _, d := range []string{local, logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	sup, err := bins.StartStoreSupport(local, logs, dbURL)
	if err != nil {
		return err
	}
	defer sup.Stop()

	reset(ctx, conn)
	time.Sleep(idle)
	if err := report(ctx, conn, fmt.Sprintf("managerd and watchdogd, idle queue, per second (%s)", idle), idle.Seconds()); err != nil {
		return err
	}

	reset(ctx, conn)
	if err := farrob.SubmitPG(ctx, dbURL, n, "noop"); err != nil {
		return err
	}
	if err := report(ctx, conn, fmt.Sprintf("Submit in batches of %d, per job", farrob.PGSubmitBatch), float64(n)); err != nil {
		return err
	}

	reset(ctx, conn)
	db0, err := sys.TreeCPU(srv.PID())
	if err != nil {
		return err
	}
	start := time.Now()
	a, err := bins.StoreAgent(local, dbURL, logs, "stat1", conc, nil)
	if err != nil {
		return err
	}
	defer a.Stop(syscall.SIGTERM, 10*time.Second)
	for {
		var done int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'succeeded'`).Scan(&done); err != nil {
			return err
		}
		if done == n {
			break
		}
		if time.Since(start) > 5*time.Minute {
			return fmt.Errorf("burn-down: %d of %d succeeded after 5 minutes (logs in %s)", done, n, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	el := time.Since(start)
	db1, err := sys.TreeCPU(srv.PID())
	if err != nil {
		return err
	}
	agentCPU, err := sys.CPUTime(a.PID())
	if err != nil {
		return err
	}
	return report(ctx, conn, fmt.Sprintf("burn-down: agentd --concurrency %d, managerd, watchdogd; %d jobs in %s (%.0f jobs/s); "+
		"CPU per job: PostgreSQL %.3f ms, agentd %.3f ms; statements per job",
		conc, n, el.Round(time.Millisecond), float64(n)/el.Seconds(), msPer(db1-db0, n), msPer(agentCPU, n)), float64(n))
}

func msPer(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Millisecond) / float64(n)
}

func reset(ctx context.Context, conn *pgx.Conn) {
	_, _ = conn.Exec(ctx, "SELECT pg_stat_statements_reset()")
}

var spaces = regexp.MustCompile(`\s+`)

// report prints the statements since the last reset (the probe's own
// left out), calls and time divided by per.
func report(ctx context.Context, conn *pgx.Conn, title string, per float64) error {
	rows, err := conn.Query(ctx, `SELECT query, calls, total_exec_time, rows, wal_records FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND query NOT LIKE '%pg_stat_statements%' AND query <> 'SELECT count(*) FROM jobs WHERE status = $1'
		ORDER BY calls DESC, total_exec_time DESC`)
	if err != nil {
		return err
	}
	defer rows.Close()
	fmt.Printf("\n%s\n\n| statement | calls | ms | rows | WAL records |\n|---|---:|---:|---:|---:|\n", title)
	var calls, ms, wal float64
	for rows.Next() {
		var q string
		var c, r, w int64
		var t float64
		if err := rows.Scan(&q, &c, &t, &r, &w); err != nil {
			return err
		}
		q = spaces.ReplaceAllString(strings.TrimSpace(q), " ")
		if len(q) > 90 {
			q = q[:87] + "..."
		}
		q = strings.ReplaceAll(q, "|", `\|`)
		fmt.Printf("| `%s` | %.3f | %.3f | %.2f | %.2f |\n", q, float64(c)/per, t/per, float64(r)/per, float64(w)/per)
		calls, ms, wal = calls+float64(c)/per, ms+t/per, wal+float64(w)/per
	}
	fmt.Printf("| **total** | **%.2f** | **%.3f** | | **%.2f** |\n", calls, ms, wal)
	return rows.Err()
}
