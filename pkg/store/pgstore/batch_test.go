package pgstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// sqlLog records the statements a store sends (pgx's query tracer).
type sqlLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *sqlLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.sql = append(l.sql, strings.Join(strings.Fields(d.SQL), " "))
	l.mu.Unlock()
	return ctx
}

func (l *sqlLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A batch is one round trip: one entry, its statements joined by " ; ".
func (l *sqlLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	l.mu.Lock()
	l.sql = append(l.sql, "")
	l.mu.Unlock()
	return ctx
}

func (l *sqlLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := strings.Join(strings.Fields(d.SQL), " ")
	if last := len(l.sql) - 1; last >= 0 {
		if l.sql[last] != "" {
			q = l.sql[last] + " ; " + q
		}
		l.sql[last] = q
	}
}

func (l *sqlLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// take returns the statements sent since the last take.
func (l *sqlLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.sql
	l.sql = nil
	return out
}

// tracedStore is newStore with its statements recorded.
func tracedStore(t *testing.T) (*Store, *sqlLog, string) {
	t.Helper()
	url := freshDB(t)
	if _, err := Migrate(ctxT(t), url); err != nil {
		t.Fatal(err)
	}
	log := &sqlLog{}
	s, err := Open(ctxT(t), url, WithScratch(t.TempDir()), func(c *config) { c.tracer = log })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	log.take()
	return s, log, url
}

// commitAll commits every claim at once (one goroutine each) and returns
// each one's error.
func commitAll(t *testing.T, cs []store.Claim, to job.State) []error {
	t.Helper()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Commit(ctxT(t), to, "done", func(j *job.Job) { e := 0; j.ExitCode = &e })
		}()
	}
	wg.Wait()
	return errs
}

// A claim of several jobs is one round trip (its planner settings and
// one statement), and the commits of
// several claims that arrive together: one round trip and one durable
// commit each, with every row, event and prompt as the transaction of
// several statements wrote them.
func TestClaimAndCommitsAreOneStatementEach(t *testing.T) {
	t.Parallel()
	s, log, _ := tracedStore(t)
	s.commits.gather = 4
	js := submit(t, s, job.SubmitRequest{ID: "a-1", Prompt: []byte(`{"x": 1}`)}, job.SubmitRequest{ID: "a-2"},
		job.SubmitRequest{ID: "a-3"}, job.SubmitRequest{ID: "a-4", Priority: 5})
	log.take()
	h := job.Holder{Actor: "agentd/w", Agent: "w"}
	cs, err := s.Claim(ctxT(t), h, store.ClaimOptions{Max: 8, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// One round trip: the claim's planner settings and the claim
	// statement, in one batch (one implicit transaction).
	if sql := log.take(); len(sql) != 1 || strings.Count(sql[0], " ; ") != 1 || !strings.Contains(sql[0], "set_config('enable_sort', 'off', true)") || !strings.Contains(sql[0], "WITH pick AS") {
		t.Fatalf("a claim of %d jobs sent %d round trips: %q", len(cs), len(sql), sql)
	}
	if len(cs) != 4 || cs[0].Job().ID != "a-4" || cs[1].Job().ID != "a-1" {
		t.Fatalf("claimed %d, first %s", len(cs), cs[0].Job().ID)
	}
	if string(cs[1].Prompt()) != string(js[0].ID+"") && string(cs[1].Prompt()) != `{"x": 1}` {
		t.Fatalf("prompt %q", cs[1].Prompt())
	}
	tokens := map[string]bool{}
	for _, c := range cs {
		j := c.Job()
		tokens[c.Token()] = true
		if j.Status != job.InProgress || j.Attempts != 1 || j.Agent != "w" || c.Token() == "" ||
			!strings.HasPrefix(j.CorrelationID, j.ID+"/1-") || j.StartedAt == nil || j.LastHeartbeat == nil {
			t.Fatalf("claimed %+v", j)
		}
		if got, _ := s.Get(ctxT(t), j.ID); got.ClaimToken != c.Token() || got.CorrelationID != j.CorrelationID {
			t.Fatalf("row %+v, claim %+v", got, j)
		}
		evs, err := s.History(ctxT(t), j.ID)
		if err != nil || len(evs) != 2 || evs[1].To != job.InProgress || evs[1].Actor != "agentd/w" ||
			evs[1].CorrelationID != j.CorrelationID || !evs[1].Time.Equal(*j.StartedAt) {
			t.Fatalf("history of %s: %+v %v", j.ID, evs, err)
		}
	}
	if len(tokens) != 4 {
		t.Fatalf("tokens not distinct: %v", tokens)
	}
	log.take()

	for i, err := range commitAll(t, cs, job.Succeeded) {
		if err != nil {
			t.Fatalf("commit %s: %v", cs[i].Job().ID, err)
		}
	}
	if sql := log.take(); len(sql) != 1 || s.commits.batches.Load() != 1 {
		t.Fatalf("4 commits sent %d statements in %d batches: %q", len(sql), s.commits.batches.Load(), sql)
	}
	for _, c := range cs {
		j := c.Job()
		got, err := s.Get(ctxT(t), j.ID)
		if err != nil || got.Status != job.Succeeded || got.FinishedAt == nil || !got.FinishedAt.Equal(*j.FinishedAt) ||
			!got.UpdatedAt.Equal(j.UpdatedAt) || got.ExitCode == nil || *got.ExitCode != 0 || got.Reason != "done" {
			t.Fatalf("row %+v (claim's %+v) %v", got, j, err)
		}
		var lease *time.Time
		if err := s.pool.QueryRow(ctxT(t), `SELECT lease_until FROM jobs WHERE id = $1`, j.ID).Scan(&lease); err != nil || lease != nil {
			t.Fatalf("lease of %s after its commit: %v %v", j.ID, lease, err)
		}
		evs, _ := s.History(ctxT(t), j.ID)
		if len(evs) != 3 || evs[2].From != job.InProgress || evs[2].To != job.Succeeded || evs[2].Reason != "done" ||
			evs[2].Attempt != 1 || !evs[2].Time.Equal(got.UpdatedAt) {
			t.Fatalf("history of %s: %+v", j.ID, evs)
		}
		if err := c.Fence(ctxT(t)); !store.Lost(err) {
			t.Fatalf("fence after commit: %v", err)
		}
	}
}

// In a batch where one claim lost its job, the others commit and that
// one is told it is fenced; its row is left as its new holder has it.
func TestBatchCommitWithAFencedClaim(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	s.commits.gather = 3
	submit(t, s, job.SubmitRequest{ID: "b-1"}, job.SubmitRequest{ID: "b-2"}, job.SubmitRequest{ID: "b-3"})
	cs, err := s.Claim(ctxT(t), job.Holder{Actor: "agentd/w", Agent: "w"}, store.ClaimOptions{Max: 3, Lease: time.Minute})
	if err != nil || len(cs) != 3 {
		t.Fatalf("claimed %d: %v", len(cs), err)
	}
	// b-2 was recovered and claimed again by another agent meanwhile.
	if _, err := sqlConn(t, url).Exec(ctxT(t), `UPDATE jobs SET claim_token = 'other', agent = 'v' WHERE id = 'b-2'`); err != nil {
		t.Fatal(err)
	}
	errs := commitAll(t, cs, job.Succeeded)
	if n := s.commits.batches.Load(); n != 1 {
		t.Fatalf("%d batches, want 1", n)
	}
	for i, c := range cs {
		id := c.Job().ID
		got, _ := s.Get(ctxT(t), id)
		evs, _ := s.History(ctxT(t), id)
		if id == "b-2" {
			if !store.Lost(errs[i]) || !errors.Is(errs[i], job.ErrFenced) || !strings.Contains(errs[i].Error(), "b-2") {
				t.Fatalf("fenced commit: %v", errs[i])
			}
			if got.Status != job.InProgress || got.ClaimToken != "other" || got.Agent != "v" || len(evs) != 2 {
				t.Fatalf("fenced row written: %+v, history %+v", got, evs)
			}
			continue
		}
		if errs[i] != nil || got.Status != job.Succeeded || len(evs) != 3 {
			t.Fatalf("commit of %s: %v, row %+v, history %+v", id, errs[i], got, evs)
		}
	}
}

// A connection cut while the batch statement runs (it waits for a row
// another transaction holds) writes nothing of the batch: every job is
// still in-progress with no new event, and the commits, called again,
// finish.
func TestConnectionCutDuringBatchCommit(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	s.commits.gather = 3
	submit(t, s, job.SubmitRequest{ID: "c-1"}, job.SubmitRequest{ID: "c-2"}, job.SubmitRequest{ID: "c-3"})
	cs, err := s.Claim(ctxT(t), job.Holder{Actor: "agentd/w", Agent: "w"}, store.ClaimOptions{Max: 3, Lease: time.Minute})
	if err != nil || len(cs) != 3 {
		t.Fatalf("claimed %d: %v", len(cs), err)
	}
	locker := sqlConn(t, url)
	tx, err := locker.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctxT(t), `SELECT 1 FROM jobs WHERE id = 'c-3' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	cut := cutter(t, s)
	watch := sqlConn(t, url)
	watched := make(chan struct{})
	defer func() { <-watched }()
	go func() {
		defer close(watched)
		// Once the batch waits for c-3 (c-1 and c-2 written, not
		// committed), every backend of the database is terminated: the
		// batch's first (waiting until it is gone), for were the
		// locker's first, the batch could take c-3 and commit before
		// its own end.
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			var n int
			if err := watch.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH u AS%'`).Scan(&n); err != nil {
				t.Errorf("watching the batch: %v", err)
				return
			}
			if n == 1 {
				cut()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("the batch never waited for the locked row")
	}()
	for i, err := range commitAll(t, cs, job.Succeeded) {
		if err == nil || store.Lost(err) {
			t.Fatalf("commit %s in a cut batch: %v (%d batches)", cs[i].Job().ID, err, s.commits.batches.Load())
		}
	}
	for _, c := range cs {
		var got *job.Job
		eventually(t, "get", func() (err error) { got, err = s.Get(ctxT(t), c.Job().ID); return err })
		evs, _ := s.History(ctxT(t), got.ID)
		if got.Status != job.InProgress || got.ClaimToken != c.Token() || len(evs) != 2 {
			t.Fatalf("half-applied batch: %+v, history %+v", got, evs)
		}
	}
	for _, c := range cs {
		eventually(t, "commit", func() error { return c.Commit(ctxT(t), job.Succeeded, "done", nil) })
		if got, _ := s.Get(ctxT(t), c.Job().ID); got.Status != job.Succeeded {
			t.Fatalf("after the second commit: %+v", got)
		}
	}
}

// A Submit of many jobs is one statement (their rows, events and the
// notification); a repeated id within the batch is a duplicate; prompts
// too large for one statement go in several, in one transaction.
func TestSubmitIsOneStatement(t *testing.T) {
	t.Parallel()
	s, log, _ := tracedStore(t)
	var reqs []job.SubmitRequest
	for i := 0; i < 50; i++ {
		reqs = append(reqs, job.SubmitRequest{Kind: "noop", Prompt: []byte(`{"i": 1}`), Actor: "bench"})
	}
	reqs = append(reqs, job.SubmitRequest{ID: "s-twice", Kind: "noop", Prompt: []byte(`{}`)},
		job.SubmitRequest{ID: "s-twice", Kind: "other", Prompt: []byte(`{}`)},
		job.SubmitRequest{ID: "s-held", Kind: "noop", Prompt: []byte(`{}`), Held: true})
	jobs, errs := s.Submit(ctxT(t), reqs)
	if sql := log.take(); len(sql) != 1 {
		t.Fatalf("a submit of %d jobs sent %d statements: %q", len(reqs), len(sql), sql)
	}
	for i := range reqs {
		if i == 51 {
			if jobs[i] != nil || !errors.Is(errs[i], job.ErrDuplicate) {
				t.Fatalf("repeated id: %v %v", jobs[i], errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("submit %d: %v", i, errs[i])
		}
		got, err := s.Get(ctxT(t), jobs[i].ID)
		evs, _ := s.History(ctxT(t), jobs[i].ID)
		if err != nil || got.Status != jobs[i].Status || !got.CreatedAt.Equal(jobs[i].CreatedAt) || got.Kind != "noop" ||
			len(evs) != 1 || evs[0].To != got.Status || evs[0].Reason != "submitted" || evs[0].Actor != reqs[i].Actor {
			t.Fatalf("job %d: %+v (returned %+v), history %+v, %v", i, got, jobs[i], evs, err)
		}
	}
	if jobs[52].Status != job.Held || jobs[0].Status != job.Queued {
		t.Fatalf("statuses %s %s", jobs[52].Status, jobs[0].Status)
	}

	big := make([]byte, job.MaxPromptSize-16)
	for i := range big {
		big[i] = ' '
	}
	copy(big, `{"a":1}`)
	var large []job.SubmitRequest
	for i := 0; i < 9; i++ {
		large = append(large, job.SubmitRequest{Kind: "noop", Prompt: big})
	}
	log.take()
	jobs, errs = s.Submit(ctxT(t), large)
	sql := log.take()
	if len(sql) != 4 || sql[0] != "begin" || sql[3] != "commit" {
		t.Fatalf("a submit of 9 MiB of prompts sent %d statements, want begin, 2, commit", len(sql))
	}
	for i := range large {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if p, err := s.Prompt(ctxT(t), jobs[i].ID); err != nil || len(p) != len(big) {
			t.Fatalf("prompt of %s: %d bytes, %v", jobs[i].ID, len(p), err)
		}
	}
}

// The request checks of several claims are one read, each answered as
// a check of its own: the request for its attempt, nothing, or fenced
// (another token, or the same job's earlier claim).
func TestRequestChecksInOneRead(t *testing.T) {
	t.Parallel()
	s, log, url := tracedStore(t)
	submit(t, s, job.SubmitRequest{ID: "r-1"}, job.SubmitRequest{ID: "r-2"}, job.SubmitRequest{ID: "r-3"})
	h := job.Holder{Actor: "agentd/w", Agent: "w"}
	old, err := s.Claim(ctxT(t), h, store.ClaimOptions{Max: 1, Lease: time.Millisecond})
	if err != nil || len(old) != 1 || old[0].Job().ID != "r-1" {
		t.Fatalf("claim: %v %v", old, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		outs, err := s.Recover(ctxT(t), store.RecoverOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim was never recovered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := s.Move(ctxT(t), "r-1", job.Stale, job.Queued, "managerd", "requeued", nil); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Claim(ctxT(t), h, store.ClaimOptions{Max: 3, Lease: time.Minute})
	if err != nil || len(cs) != 3 || cs[0].Job().ID != "r-1" {
		t.Fatalf("claim: %v %v", cs, err)
	}
	if err := s.RequestControl(ctxT(t), "r-2", job.Control{Action: job.ControlKill, Actor: "op"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlConn(t, url).Exec(ctxT(t), `UPDATE jobs SET claim_token = 'other' WHERE id = 'r-3'`); err != nil {
		t.Fatal(err)
	}
	all := append([]store.Claim{old[0]}, cs...)
	s.controls.gather = len(all)
	log.take()
	ctls, errs := make([]*job.Control, len(all)), make([]error, len(all))
	var wg sync.WaitGroup
	for i, c := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctls[i], errs[i] = c.PendingControl(ctxT(t))
		}()
	}
	wg.Wait()
	if sql := log.take(); len(sql) != 1 || s.controls.batches.Load() != 1 {
		t.Fatalf("%d checks sent %d statements in %d batches", len(all), len(sql), s.controls.batches.Load())
	}
	if !store.Lost(errs[0]) || ctls[0] != nil {
		t.Errorf("the earlier claim of r-1: %v %v", ctls[0], errs[0])
	}
	if errs[1] != nil || ctls[1] != nil {
		t.Errorf("r-1: %v %v", ctls[1], errs[1])
	}
	if errs[2] != nil || ctls[2] == nil || ctls[2].Action != job.ControlKill || ctls[2].Actor != "op" {
		t.Errorf("r-2: %+v %v", ctls[2], errs[2])
	}
	if !store.Lost(errs[3]) || ctls[3] != nil {
		t.Errorf("r-3: %v %v", ctls[3], errs[3])
	}
}

// A commit the database refuses (a constraint, an illegal transition)
// does not take the others of its batch down with it: they commit, and
// it gets its own error.
func TestBatchCommitWithARefusedRow(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	s.commits.gather = 3
	submit(t, s, job.SubmitRequest{ID: "d-1"}, job.SubmitRequest{ID: "d-2"}, job.SubmitRequest{ID: "d-3"}, job.SubmitRequest{ID: "d-4"})
	cs, err := s.Claim(ctxT(t), job.Holder{Actor: "agentd/w", Agent: "w"}, store.ClaimOptions{Max: 4, Lease: time.Minute})
	if err != nil || len(cs) != 4 {
		t.Fatalf("claimed %d: %v", len(cs), err)
	}
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Commit(ctxT(t), job.Succeeded, "done", func(j *job.Job) {
				switch j.ID {
				case "d-2":
					j.Attempts = -1 // CHECK (attempts >= 0)
				case "d-4":
					j.Status = job.Deferred // not a target of in-progress
				}
			})
		}()
	}
	wg.Wait()
	for i, c := range cs {
		id := c.Job().ID
		got, _ := s.Get(ctxT(t), id)
		switch id {
		case "d-2", "d-4":
			if errs[i] == nil || store.Lost(errs[i]) || got.Status != job.InProgress {
				t.Errorf("refused commit of %s: %v, row %+v", id, errs[i], got)
			}
			if id == "d-4" && !errors.Is(errs[i], job.ErrIllegal) {
				t.Errorf("illegal transition of d-4: %v", errs[i])
			}
		default:
			if errs[i] != nil || got.Status != job.Succeeded {
				t.Errorf("commit of %s beside a refused one: %v, row %+v", id, errs[i], got)
			}
		}
	}
}
