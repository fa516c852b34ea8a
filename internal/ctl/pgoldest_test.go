package ctl_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// stats, top and the dashboard's overview on a database find the oldest
// queued job without reading the queue: pg_stat_statements counts the
// rows their statements returned with 3,000 jobs queued (six pages of a
// listing of the queue), and the overview (stats and the workers) asks
// for the oldest once.
func TestStoreOldestQueuedReadsNoQueue(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "farro-testpg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := testpg.StartServerWith(dir, "shared_preload_libraries=pg_stat_statements")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	url := testpg.NewDatabase(t, srv.URL)
	ctx := storeCtx(t)
	if _, err := pgstore.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	st, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	// The oldest is submitted alone, first; the others in one batch
	// (the same created_at), their IDs before its.
	reqs := []job.SubmitRequest{{ID: "zz-first", Kind: "exec", Prompt: []byte(`{}`), Actor: "test"}}
	if _, errs := st.Submit(ctx, reqs); errs[0] != nil {
		t.Fatal(errs[0])
	}
	reqs = nil
	for i := range 2999 {
		reqs = append(reqs, job.SubmitRequest{ID: fmt.Sprintf("job%04d", i), Kind: "exec", Prompt: []byte(`{}`), Actor: "test"})
	}
	_, errs := st.Submit(ctx, reqs)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	if _, err := conn.Exec(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
	// rows is what the statements run since the last call returned in
	// all, and how many times the oldest queued job was asked for.
	rows := func() (returned, oldest int64) {
		t.Helper()
		err := conn.QueryRow(ctx, `SELECT coalesce(sum(rows), 0)::bigint,
			coalesce(sum(calls) FILTER (WHERE query LIKE '%status = $1 ORDER BY created_at, id LIMIT%'
				OR query LIKE '%status = ''queued'' ORDER BY created_at, id LIMIT%'), 0)::bigint
			FROM pg_stat_statements
			WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND query NOT LIKE '%pg_stat_statements%'`).Scan(&returned, &oldest)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
			t.Fatal(err)
		}
		return returned, oldest
	}
	run := func(name string, fn func(c *ctl.Ctl) error) string {
		t.Helper()
		var out, errb bytes.Buffer
		c := &ctl.Ctl{Root: filepath.Join(t.TempDir(), "no-such-spool"), Store: url, Stdout: &out, Stderr: &errb}
		rows()
		if err := fn(c); err != nil {
			t.Fatalf("%s: %v (%s)", name, err, errb.String())
		}
		returned, oldest := rows()
		t.Logf("%s: %d rows returned, oldest asked %d times", name, returned, oldest)
		// The counts by state, the schema's version rows, the oldest
		// job: tens of rows, not the queue's 3,000.
		if returned > 50 || oldest != 1 {
			t.Errorf("%s: its statements returned %d rows and asked for the oldest queued job %d times; want at most 50 rows, once",
				name, returned, oldest)
		}
		return out.String()
	}

	var stats ctl.Stats
	if err := json.Unmarshal([]byte(run("stats --json", func(c *ctl.Ctl) error { return c.Stats(true) })), &stats); err != nil {
		t.Fatal(err)
	}
	if stats.OldestQueuedID != "zz-first" || stats.OldestQueuedAge == nil {
		t.Errorf("stats: oldest queued %q %v, want zz-first", stats.OldestQueuedID, stats.OldestQueuedAge)
	}
	var top ctl.TopDoc
	if err := json.Unmarshal([]byte(run("top --json", func(c *ctl.Ctl) error { return c.Top(ctl.TopOptions{JSON: true}) })), &top); err != nil {
		t.Fatal(err)
	}
	if top.OldestQueuedAge == nil || top.States[job.Queued] != 3000 {
		t.Errorf("top: oldest queued age %v, %d queued; want an age, 3000", top.OldestQueuedAge, top.States[job.Queued])
	}
	run("the overview's reads", func(c *ctl.Ctl) error {
		if _, err := c.StatsOf(); err != nil {
			return err
		}
		_, err := c.WorkersOf()
		return err
	})
}
