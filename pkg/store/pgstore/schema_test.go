package pgstore

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// Open refuses a database that was never migrated and tells the user
// what to run; Migrate brings it to this build's version, and running it
// again changes nothing.
func TestMigrateIdempotentAndOpenNeedsIt(t *testing.T) {
	t.Parallel()
	url := freshDB(t)
	_, err := Open(ctxT(t), url)
	if !errors.Is(err, ErrNotMigrated) || !strings.Contains(err.Error(), "farroctl migrate") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Open of an empty database: %v", err)
	}
	res, err := Migrate(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	if res.From != 0 || res.To != SchemaVersion() || len(res.Applied) != SchemaVersion() {
		t.Fatalf("first migrate: %+v", res)
	}
	res, err = Migrate(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	if res.From != SchemaVersion() || res.To != SchemaVersion() || len(res.Applied) != 0 {
		t.Fatalf("second migrate: %+v", res)
	}
	db, build, err := Status(ctxT(t), url)
	if err != nil || db != build || build != SchemaVersion() {
		t.Fatalf("status: %d %d %v", db, build, err)
	}
	s, err := Open(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
}

// Two migrators at once apply each migration once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := freshDB(t)
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() { _, err := Migrate(ctxT(t), url); errs <- err }()
	}
	for i := 0; i < 3; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := sqlConn(t, url).QueryRow(ctxT(t), `SELECT count(*) FROM farro_schema_version`).Scan(&n); err != nil || n != SchemaVersion() {
		t.Fatalf("%d version rows (%v), want %d", n, err, SchemaVersion())
	}
}

// A database migrated by a newer farro is refused by Open and Migrate,
// with a clear one-line error, and left alone.
func TestSchemaNewerThanBuildRefused(t *testing.T) {
	t.Parallel()
	_, url := newStore(t)
	c := sqlConn(t, url)
	if _, err := c.Exec(ctxT(t), `INSERT INTO farro_schema_version (version, name) VALUES ($1, 'from-the-future.sql')`, SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctxT(t), url)
	if !errors.Is(err, ErrSchemaNewer) || !strings.Contains(err.Error(), "upgrade farro") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Open: %v", err)
	}
	if _, err := Migrate(ctxT(t), url); !errors.Is(err, ErrSchemaNewer) {
		t.Fatalf("Migrate: %v", err)
	}
	var n int
	if err := c.QueryRow(ctxT(t), `SELECT count(*) FROM farro_schema_version`).Scan(&n); err != nil || n != SchemaVersion()+1 {
		t.Fatalf("version rows %d (%v): the refused database was changed", n, err)
	}
}

// The trigger's table is pkg/job's legal-transitions map, pair for pair.
func TestTransitionsTableIsJobMap(t *testing.T) {
	t.Parallel()
	_, url := newStore(t)
	rows, err := sqlConn(t, url).Query(ctxT(t), `SELECT from_state || ' -> ' || to_state FROM farro_transitions`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	var want []string
	for from, tos := range job.Transitions() {
		for _, to := range tos {
			want = append(want, string(from)+" -> "+string(to))
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("farro_transitions differs from job.Transitions() (a change of the map needs a migration):\n got %q\nwant %q", got, want)
	}
}

// A hand-written UPDATE cannot make an illegal move; a legal one passes;
// a terminal job goes back to queued only through Retry.
func TestTriggerRefusesIllegalUpdate(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	j := submit(t, s, job.SubmitRequest{})[0]
	c := sqlConn(t, url)
	_, err := c.Exec(ctxT(t), `UPDATE jobs SET status = 'succeeded' WHERE id = $1`, j.ID)
	if pgCode(err) != "FR001" || !strings.Contains(err.Error(), "illegal transition queued -> succeeded") {
		t.Fatalf("queued -> succeeded by hand: %v", err)
	}
	if !errors.Is(mapErr(err), job.ErrIllegal) {
		t.Fatalf("mapErr: %v", mapErr(err))
	}
	if st := status(t, s, j.ID); st != job.Queued {
		t.Fatalf("status %s after a refused update", st)
	}
	if _, err := c.Exec(ctxT(t), `UPDATE jobs SET status = 'killed' WHERE id = $1`, j.ID); err != nil {
		t.Fatalf("queued -> killed by hand: %v", err)
	}
	if _, err := c.Exec(ctxT(t), `UPDATE jobs SET status = 'queued' WHERE id = $1`, j.ID); pgCode(err) != "FR001" {
		t.Fatalf("killed -> queued by hand: %v", err)
	}
	r, err := s.Retry(ctxT(t), j.ID, "farroctl", false)
	if err != nil || r.Status != job.Queued || status(t, s, j.ID) != job.Queued {
		t.Fatalf("Retry: %v %+v", err, r)
	}
	// The retry setting was local to Retry's transaction.
	if _, err := c.Exec(ctxT(t), `UPDATE jobs SET status = 'killed' WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctxT(t), `UPDATE jobs SET status = 'queued' WHERE id = $1`, j.ID); pgCode(err) != "FR001" {
		t.Fatalf("killed -> queued by hand after a Retry: %v", err)
	}
}

// The indexes a move writes are the claim order's, the state scans' and
// the history's only (with the events feed's BRIN index, which an insert
// at the table's end leaves alone until its pages are summarised, and
// the partial indexes, which only a row in their states enters: the
// claim order's and the oldest queued job's a queued one, retention's a
// succeeded or killed one), and a heartbeat writes none (a HOT update).
func TestIndexesPerMoveAndHOTHeartbeat(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	c := sqlConn(t, url)
	rows, err := c.Query(ctxT(t), `SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN ('jobs', 'job_events') ORDER BY indexname`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	partial := map[string]string{
		"jobs_claim_order":    "WHERE (status = 'queued'::text)",
		"jobs_deferred_due":   "WHERE (status = 'deferred'::text)",
		"jobs_finished":       "WHERE (status = ANY (ARRAY['succeeded'::text, 'killed'::text]))",
		"jobs_queued_created": "WHERE (status = 'queued'::text)",
	}
	for rows.Next() {
		var n, def string
		if err := rows.Scan(&n, &def); err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
		if w, ok := partial[n]; ok && !strings.HasSuffix(def, w) {
			t.Errorf("index %s: %s; want it partial, %s", n, def, w)
		}
	}
	if want := "job_events_feed job_events_job jobs_claim_order jobs_deferred_due jobs_finished jobs_pkey jobs_queued_created jobs_status_id"; strings.Join(got, " ") != want {
		t.Fatalf("indexes %q, want %s", got, want)
	}
	submit(t, s, job.SubmitRequest{})
	cl := claimOne(t, s, "w", time.Minute)
	tx, err := c.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var hb, upd time.Time
	if err := tx.QueryRow(ctxT(t), heartbeatSQL, cl.Job().ID, cl.Token(), time.Minute).Scan(&hb, &upd); err != nil {
		t.Fatal(err)
	}
	var n, hot int64
	if err := tx.QueryRow(ctxT(t), `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'jobs'`).Scan(&n, &hot); err != nil {
		t.Fatal(err)
	}
	if n != 1 || hot != 1 {
		t.Fatalf("heartbeat: %d updates, %d of them HOT; want 1 HOT", n, hot)
	}
}
