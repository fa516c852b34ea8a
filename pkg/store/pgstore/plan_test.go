package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// TestClaimReadsTheIndex: with many queued jobs (and statistics, as
// autovacuum keeps them), the claim statement's pick reads the claim
// index up to its LIMIT, whether or not a kind is paused; a plan that
// scans and sorts the whole table costs seconds a claim at a million
// queued jobs. With the paused test as an anti-join, or as a test of the
// kind column itself, the planner takes that plan (docs/POSTGRES.md says
// why). paused_kinds is read once per statement (an InitPlan): as a
// function called per row read it cost 43% of PostgreSQL's CPU in the
// burn-down.
func TestClaimReadsTheIndex(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	const batches, per = 10, 2000
	for b := 0; b < batches; b++ {
		reqs := make([]job.SubmitRequest, per)
		for i := range reqs {
			reqs[i] = job.SubmitRequest{Kind: "noop", Prompt: []byte(`{}`), Priority: i % 3}
		}
		if _, errs := s.Submit(ctxT(t), reqs); errs != nil {
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	c := sqlConn(t, url)
	if _, err := c.Exec(ctxT(t), "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
	a := strings.Index(claimFastSQL, "WITH pick AS (") + len("WITH pick AS (")
	b := strings.Index(claimFastSQL, "\n), plain AS")
	pick := strings.NewReplacer("$1", "NULL::text[]", "$2", "8").Replace(claimFastSQL[a:b])
	plan := func(when string) {
		t.Helper()
		rows, err := c.Query(ctxT(t), "EXPLAIN "+pick)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		p := strings.Join(lines, "\n")
		if !strings.Contains(p, "Index Scan using jobs_claim_order") || strings.Contains(p, "Seq Scan on jobs") {
			t.Errorf("%s: the claim does not read the claim index:\n%s", when, p)
		}
		if !strings.Contains(p, "InitPlan") || strings.Contains(p, "SubPlan") || strings.Contains(p, "farro_kind_paused") {
			t.Errorf("%s: the claim does not read paused_kinds once per statement:\n%s", when, p)
		}
	}
	plan("no kind paused")
	if _, err := s.PauseKind(ctxT(t), PausedKind{Kind: "other"}); err != nil {
		t.Fatal(err)
	}
	plan("a kind paused")
	if _, err := s.ResumeKind(ctxT(t), "other"); err != nil {
		t.Fatal(err)
	}
	plan(fmt.Sprintf("after a resume (%d queued)", batches*per))
}

// queryLog records the statements a store sends with their arguments, to
// explain them as they were sent.
type queryLog struct {
	mu sync.Mutex
	q  []pgx.TraceQueryStartData
}

func (l *queryLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.q = append(l.q, d)
	l.mu.Unlock()
	return ctx
}

func (l *queryLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *queryLog) take() []pgx.TraceQueryStartData {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.q
	l.q = nil
	return out
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON)'s plan.
type planNode struct {
	Type           string     `json:"Node Type"`
	Relation       string     `json:"Relation Name"`
	Index          string     `json:"Index Name"`
	Rows           float64    `json:"Actual Rows"`
	Loops          float64    `json:"Actual Loops"`
	RemovedFilter  float64    `json:"Rows Removed by Filter"`
	RemovedRecheck float64    `json:"Rows Removed by Index Recheck"`
	Plans          []planNode `json:"Plans"`
}

// scans are the plan's nodes that read rows of table rel, and how many
// rows they read in all (returned or removed by a filter).
func (n planNode) scans(rel string) (nodes []planNode, read float64) {
	if n.Relation == rel {
		nodes = append(nodes, n)
		read += (n.Rows + n.RemovedFilter + n.RemovedRecheck) * n.Loops
	}
	for _, c := range n.Plans {
		cn, cr := c.scans(rel)
		nodes, read = append(nodes, cn...), read+cr
	}
	return nodes, read
}

// explainAnalyze runs sql with args under EXPLAIN (ANALYZE, FORMAT JSON)
// and returns its plan and the plan's text.
func explainAnalyze(t *testing.T, c *pgx.Conn, sql string, args ...any) (planNode, string) {
	t.Helper()
	var raw []byte
	if err := c.QueryRow(ctxT(t), "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&raw); err != nil {
		t.Fatalf("explain: %v", err)
	}
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		t.Fatalf("explain's JSON: %v %s", err, raw)
	}
	return out[0].Plan, string(raw)
}

// TestRetentionReadsOnlyDueJobs: managerd's retention listing (List
// ByFinished of one terminal state before a cutoff, a page of 500) reads
// the due jobs only, through jobs_finished, at a table where most
// terminal jobs are retained and not due: in ID order through
// jobs_status_id it read every retained job of the state up to its page
// of due ones. The listing itself is checked too: every due job once,
// in finishing order, across pages whose boundary falls among jobs that
// finished at the same time, those without finished_at included.
func TestRetentionReadsOnlyDueJobs(t *testing.T) {
	t.Parallel()
	s, log, url := loggedStore(t)
	c := sqlConn(t, url)
	const notDue, due, noFinish = 20000, 1200, 5
	// Retained, not due: succeeded and killed jobs that finished now,
	// their IDs before the due ones' (an ID-order listing meets them
	// first). Due: succeeded two days ago, three at each instant, their
	// IDs in the other order; and a few set succeeded by hand, without
	// finished_at (finished at their updated_at).
	for _, q := range []string{
		`INSERT INTO jobs (id, schema_version, kind, status, created_at, updated_at, finished_at, prompt, age_key)
		SELECT 'a' || lpad(g::text, 6, '0'), $1, 'noop', CASE WHEN g % 2 = 0 THEN 'succeeded' ELSE 'killed' END,
			now(), now(), now(), '{}', now()
		FROM generate_series(1, ` + fmt.Sprint(2*notDue) + `) g`,
		`INSERT INTO jobs (id, schema_version, kind, status, created_at, updated_at, finished_at, prompt, age_key)
		SELECT 'd' || lpad(g::text, 6, '0'), $1, 'noop', 'succeeded', now() - interval '3 days', now() - interval '3 days',
			now() - interval '2 days' - (g / 3) * interval '1 second', '{}', now() - interval '3 days'
		FROM generate_series(1, ` + fmt.Sprint(due) + `) g`,
		`INSERT INTO jobs (id, schema_version, kind, status, created_at, updated_at, prompt, age_key)
		SELECT 'n' || lpad(g::text, 6, '0'), $1, 'noop', 'succeeded', now() - interval '3 days',
			now() - interval '2 days' - g * interval '7 seconds', '{}', now() - interval '3 days'
		FROM generate_series(1, ` + fmt.Sprint(noFinish) + `) g`,
	} {
		if _, err := c.Exec(ctxT(t), q, job.SchemaVersion); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Exec(ctxT(t), "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
	var want []string
	rows, err := c.Query(ctxT(t), `SELECT id FROM jobs WHERE status = 'succeeded' AND coalesce(finished_at, updated_at) < now() - interval '1 day'
		ORDER BY coalesce(finished_at, updated_at), id`)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { want = append(want, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(want) != due+noFinish {
		t.Fatalf("%d due jobs set up, want %d", len(want), due+noFinish)
	}

	cutoff := time.Now().Add(-24 * time.Hour)
	list := func(limit int) []string {
		t.Helper()
		var got []string
		f := store.Filter{States: []job.State{job.Succeeded}, FinishedBefore: cutoff, ByFinished: true, Limit: limit}
		if err := s.List(ctxT(t), f, func(j *job.Job) error { got = append(got, j.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(0); !slices.Equal(got, want) {
		t.Errorf("the due jobs listed in %d pages: %d jobs, first %v; want %d, first %v", len(log.take()), len(got), got[:min(5, len(got))], len(want), want[:5])
	}

	// managerd's page, as it sends it.
	log.take()
	if got := list(500); !slices.Equal(got, want[:500]) {
		t.Errorf("retention's page: %d jobs, want the first 500 due", len(got))
	}
	sent := log.take()
	if len(sent) != 1 {
		t.Fatalf("retention's page sent %d statements, want 1", len(sent))
	}
	check := func(when string, plan planNode, text string) {
		t.Helper()
		nodes, read := plan.scans("jobs")
		for _, n := range nodes {
			if n.Type == "Bitmap Heap Scan" && len(n.Plans) == 1 {
				n = n.Plans[0]
			}
			if n.Index != "jobs_finished" {
				t.Errorf("%s: jobs read by %s %s, not by jobs_finished:\n%s", when, n.Type, n.Index, text)
			}
		}
		// The due jobs (all of them when the planner finds it cheaper
		// to sort them than to read the index in order, as here: they
		// are few, and side by side in the table), and the row at
		// which each scan stops.
		if read > due+noFinish+2 {
			t.Errorf("%s: the listing read %.0f rows of jobs for a page of 500 of the %d due jobs (%d retained, not due):\n%s",
				when, read, due+noFinish, 2*notDue, text)
		}
		t.Logf("%s: %.0f rows read for a page of 500 (%d due, %d not due)", when, read, due+noFinish, 2*notDue)
	}
	plan, text := explainAnalyze(t, c, sent[0].SQL, sent[0].Args...)
	check("custom plan", plan, text)
	// The plan a prepared statement may settle on after a few runs.
	if _, err := c.Exec(ctxT(t), "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	plan, text = explainAnalyze(t, c, sent[0].SQL, sent[0].Args...)
	check("generic plan", plan, text)
}

// TestOldestQueuedReadsOneEntry: the oldest queued job (the smallest
// created_at, of those the smallest ID) is one entry of
// jobs_queued_created, at a queue whose claim order, ID order and age_key
// all say otherwise, and with older jobs in other states.
func TestOldestQueuedReadsOneEntry(t *testing.T) {
	t.Parallel()
	s, log, url := loggedStore(t)
	if id, at, err := s.OldestQueued(ctxT(t)); err != nil || id != "" || !at.IsZero() {
		t.Fatalf("OldestQueued of an empty queue: %q %v %v", id, at, err)
	}
	c := sqlConn(t, url)
	const queued = 20000
	for _, q := range []string{
		// Created later as their IDs grow smaller, their age_key (the
		// claim order's age) the other way, three priorities.
		`INSERT INTO jobs (id, schema_version, kind, status, priority, created_at, updated_at, prompt, age_key)
		SELECT 'q' || lpad(g::text, 6, '0'), $1, 'noop', 'queued', g % 3, now() - g * interval '1 ms', now(), '{}',
			now() - interval '1 day' + g * interval '1 ms'
		FROM generate_series(1, ` + fmt.Sprint(queued) + `) g`,
		// The oldest: three created at the same instant, the smallest ID
		// of them the answer; priority 0, the claim's last.
		`INSERT INTO jobs (id, schema_version, kind, status, created_at, updated_at, prompt, age_key)
		SELECT 't00000' || g, $1, 'noop', 'queued', now() - interval '1 hour', now(), '{}', now()
		FROM generate_series(1, 3) g`,
		// Older still, in other states.
		`INSERT INTO jobs (id, schema_version, kind, status, created_at, updated_at, prompt, age_key)
		SELECT 'a00000' || g, $1, 'noop', (ARRAY['held', 'deferred', 'in-progress', 'succeeded'])[g],
			now() - interval '2 days', now(), '{}', now() - interval '2 days'
		FROM generate_series(1, 4) g`,
		`ANALYZE jobs`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, job.SchemaVersion)
		}
		if _, err := c.Exec(ctxT(t), q, args...); err != nil {
			t.Fatal(err)
		}
	}
	var want time.Time
	if err := c.QueryRow(ctxT(t), `SELECT created_at FROM jobs WHERE id = 't000001'`).Scan(&want); err != nil {
		t.Fatal(err)
	}
	log.take()
	id, at, err := s.OldestQueued(ctxT(t))
	if err != nil || id != "t000001" || !at.Equal(want) {
		t.Fatalf("OldestQueued: %q %v %v; want t000001 %v", id, at, err, want)
	}
	sent := log.take()
	if len(sent) != 1 {
		t.Fatalf("OldestQueued sent %d statements, want 1", len(sent))
	}
	for _, mode := range []string{"auto", "force_generic_plan"} {
		if _, err := c.Exec(ctxT(t), "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		plan, text := explainAnalyze(t, c, sent[0].SQL, sent[0].Args...)
		nodes, read := plan.scans("jobs")
		for _, n := range nodes {
			if n.Index != "jobs_queued_created" {
				t.Errorf("%s: jobs read by %s %s, not by jobs_queued_created:\n%s", mode, n.Type, n.Index, text)
			}
		}
		if read > 1 {
			t.Errorf("%s: %.0f rows of jobs read for the oldest of %d queued:\n%s", mode, read, queued+3, text)
		}
	}
}

// TestClaimAfterABurstReadsTheIndexHead: right after a burst of submits
// into an empty queue, while the table's statistics still say it is
// empty (autovacuum has not analyzed it), a claim reads a few index
// entries (the head of the claim index, a key lookup per job), not every
// queued job: the plan claimPlanSQL fixes. Counted by the server's own
// statistics of index entries read, flushed at once around the claim.
func TestClaimAfterABurstReadsTheIndexHead(t *testing.T) {
	t.Parallel()
	url := freshDB(t)
	if _, err := Migrate(ctxT(t), url); err != nil {
		t.Fatal(err)
	}
	c := sqlConn(t, url)
	for _, q := range []string{"ALTER TABLE jobs SET (autovacuum_enabled = false)", "SET stats_fetch_consistency = none"} {
		if _, err := c.Exec(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(ctxT(t), url, WithMaxConns(1)) // one backend: its statistics are flushed as the test says
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	reqs := make([]job.SubmitRequest, 5000)
	for i := range reqs {
		reqs[i] = job.SubmitRequest{Kind: "noop", Prompt: []byte(`{}`), Priority: i % 3}
	}
	submit(t, s, reqs...)
	read := func() int64 {
		t.Helper()
		// The store's backend reports what it read at the end of its
		// next transaction, at once.
		if _, err := s.pool.Exec(ctxT(t), "SELECT pg_stat_force_next_flush()"); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := c.QueryRow(ctxT(t), `SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE relname = 'jobs'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := read()
	cs, err := s.Claim(ctxT(t), job.Holder{Actor: "agentd/a1", Agent: "a1"}, store.ClaimOptions{Max: 8})
	if err != nil || len(cs) != 8 {
		t.Fatalf("claim: %d jobs, %v", len(cs), err)
	}
	for _, c := range cs {
		if c.Job().Priority != 2 {
			t.Fatalf("claimed %s of priority %d, want the best (2) first", c.Job().ID, c.Job().Priority)
		}
	}
	if n := read() - before; n > 100 {
		t.Errorf("one claim of 8 read %d index entries of jobs with 5000 queued and stale statistics, want a few dozen", n)
	}
}

// TestDueDeferredListingReadsOnlyDueJobs: managerd's promotion pass
// (List of deferred jobs DueBy now, a page of 500 in ID order) reads the
// due jobs, not every deferred job, when many are scheduled for later and
// their IDs come first.
func TestDueDeferredListingReadsOnlyDueJobs(t *testing.T) {
	t.Parallel()
	s, log, url := loggedStore(t)
	c := sqlConn(t, url)
	const later, due = 30000, 40
	for _, q := range []string{
		// Scheduled for tomorrow, their IDs first.
		`INSERT INTO jobs (id, schema_version, kind, status, created_at, updated_at, not_before, prompt, age_key)
		SELECT 'a' || lpad(g::text, 6, '0'), $1, 'noop', 'deferred', now(), now(), now() + interval '1 day', '{}', now()
		FROM generate_series(1, ` + fmt.Sprint(later) + `) g`,
		// Due a minute ago.
		`INSERT INTO jobs (id, schema_version, kind, status, created_at, updated_at, not_before, prompt, age_key)
		SELECT 'd' || lpad(g::text, 6, '0'), $1, 'noop', 'deferred', now(), now(), now() - interval '1 minute', '{}', now()
		FROM generate_series(1, ` + fmt.Sprint(due) + `) g`,
		`ANALYZE jobs`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, job.SchemaVersion)
		}
		if _, err := c.Exec(ctxT(t), q, args...); err != nil {
			t.Fatal(err)
		}
	}
	log.take()
	var got []string
	f := store.Filter{States: []job.State{job.Deferred}, DueBy: time.Now(), Limit: 500}
	if err := s.List(ctxT(t), f, func(j *job.Job) error { got = append(got, j.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != due || got[0] != "d000001" || !slices.IsSorted(got) {
		t.Fatalf("listed %d due jobs (first %v), want the %d due ones in ID order", len(got), got[:min(3, len(got))], due)
	}
	sent := log.take()
	if len(sent) != 1 {
		t.Fatalf("the listing sent %d statements, want 1", len(sent))
	}
	for _, mode := range []string{"auto", "force_generic_plan"} {
		if _, err := c.Exec(ctxT(t), "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		plan, text := explainAnalyze(t, c, sent[0].SQL, sent[0].Args...)
		if _, read := plan.scans("jobs"); read > 2*due {
			t.Errorf("%s: the listing read %.0f rows of jobs for %d due jobs (%d deferred for later):\n%s", mode, read, due, later, text)
		}
	}
}

// loggedStore is a store on a fresh migrated database whose statements
// (with their arguments) are logged, for a test that explains them.
func loggedStore(t *testing.T) (*Store, *queryLog, string) {
	t.Helper()
	url := freshDB(t)
	if _, err := Migrate(ctxT(t), url); err != nil {
		t.Fatal(err)
	}
	log := &queryLog{}
	s, err := Open(ctxT(t), url, WithScratch(t.TempDir()), func(c *config) { c.tracer = log })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, log, url
}
