package pgstore

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// healthyQueue gives s a queue in every ordinary shape: queued,
// succeeded, failed, held and two running jobs of a live agent, a
// paused kind.
func healthyQueue(t *testing.T, s *Store) {
	t.Helper()
	ctx := ctxT(t)
	if _, err := s.Register(ctx, Registration{Kind: KindAgentd, ID: "w1", Host: "host-a", PID: 1, Fresh: time.Hour}); err != nil {
		t.Fatal(err)
	}
	submit(t, s, job.SubmitRequest{ID: "ok-done"}, job.SubmitRequest{ID: "ok-failed"}, job.SubmitRequest{ID: "ok-run1"}, job.SubmitRequest{ID: "ok-run2"})
	if err := claimOne(t, s, "w1", time.Hour).Commit(ctx, job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	if err := claimOne(t, s, "w1", time.Hour).Commit(ctx, job.Failed, "exit 1", nil); err != nil {
		t.Fatal(err)
	}
	claimOne(t, s, "w1", time.Hour)
	claimOne(t, s, "w1", time.Hour)
	submit(t, s, job.SubmitRequest{ID: "ok-held"}, job.SubmitRequest{ID: "ok-queued"})
	if _, err := s.Move(ctx, "ok-held", job.Queued, job.Held, "test", "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PauseKind(ctx, PausedKind{Kind: "noop", By: "test", Reason: "maintenance"}); err != nil {
		t.Fatal(err)
	}
}

func TestCheckHealthyQueueHasNoProblems(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	healthyQueue(t, s)
	r, err := s.Check(ctxT(t), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 0 {
		t.Fatalf("problems in a healthy queue: %+v", r.Problems)
	}
	if r.SchemaVersion != SchemaVersion() || r.BuildVersion != SchemaVersion() || r.Now.IsZero() {
		t.Fatalf("report: schema %d build %d now %v", r.SchemaVersion, r.BuildVersion, r.Now)
	}
	if len(r.Paused) != 1 || r.Paused[0].Kind != "noop" || r.Paused[0].Reason != "maintenance" {
		t.Fatalf("paused kinds: %+v", r.Paused)
	}
}

// Each inconsistency, made by a hand-written statement, is reported, by
// its kind, for its job only.
func TestCheckFindsEachInconsistency(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	ctx := ctxT(t)
	healthyQueue(t, s)
	c := sqlConn(t, url)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := c.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if _, err := s.ResumeKind(ctx, "noop"); err != nil {
		t.Fatal(err)
	}
	submit(t, s, job.SubmitRequest{ID: "bad-lease"}, job.SubmitRequest{ID: "bad-nolease"}, job.SubmitRequest{ID: "bad-ghost"},
		job.SubmitRequest{ID: "bad-token"}, job.SubmitRequest{ID: "bad-ctl-other"}, job.SubmitRequest{ID: "bad-ctl-done"},
		job.SubmitRequest{ID: "bad-hist"}, job.SubmitRequest{ID: "bad-nohist"}, job.SubmitRequest{ID: "bad-stray"})
	// Each claimed on its own (its priority raised for the claim), by its
	// agent.
	claim := func(id, agent string) store.Claim {
		t.Helper()
		exec(`UPDATE jobs SET priority = 100 WHERE id = $1`, id)
		cl := claimOne(t, s, agent, time.Hour)
		if cl.Job().ID != id {
			t.Fatalf("claimed %s, want %s", cl.Job().ID, id)
		}
		exec(`UPDATE jobs SET priority = 0 WHERE id = $1`, id)
		return cl
	}
	// An expired lease (5 minutes ago) and none at all.
	claim("bad-lease", "w1")
	exec(`UPDATE jobs SET lease_until = now() - interval '5 minutes' WHERE id = 'bad-lease'`)
	claim("bad-nolease", "w1")
	exec(`UPDATE jobs SET lease_until = NULL WHERE id = 'bad-nolease'`)
	// A running job of an agent with no row.
	claim("bad-ghost", "ghost")
	// A running job that lost its claim token.
	claim("bad-token", "w1")
	exec(`UPDATE jobs SET claim_token = '' WHERE id = 'bad-token'`)
	// A request for another attempt than the running one.
	claim("bad-ctl-other", "w1")
	if err := s.RequestControl(ctx, "bad-ctl-other", job.Control{Action: job.ControlHold}); err != nil {
		t.Fatal(err)
	}
	exec(`UPDATE jobs SET control = jsonb_set(control, '{claim_token}', '"an-older-token"') WHERE id = 'bad-ctl-other'`)
	// A hold request that came as the job succeeded: it stays with the
	// finished job, where nothing acts on it.
	done := claim("bad-ctl-done", "w1")
	if err := s.RequestControl(ctx, "bad-ctl-done", job.Control{Action: job.ControlHold}); err != nil {
		t.Fatal(err)
	}
	if err := done.Commit(ctx, job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	// History that does not end in the state: a hand-written move past the
	// transitions trigger, and a job whose events were deleted.
	exec(`ALTER TABLE jobs DISABLE TRIGGER jobs_transition`)
	exec(`UPDATE jobs SET status = 'succeeded' WHERE id = 'bad-hist'`)
	exec(`ALTER TABLE jobs ENABLE TRIGGER jobs_transition`)
	exec(`DELETE FROM job_events WHERE job_id = 'bad-nohist'`)
	// A lease on a job that is not running.
	exec(`UPDATE jobs SET lease_until = now() + interval '1 hour' WHERE id = 'bad-stray'`)

	r, err := s.Check(ctx, CheckOptions{Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	byKey := map[string]Problem{}
	for _, p := range r.Problems {
		got = append(got, p.Kind+" "+p.ID)
		byKey[p.Kind+" "+p.ID] = p
		if p.Detail == "" || strings.Contains(p.Detail, "\n") {
			t.Errorf("%s %s: detail %q, want one line", p.Kind, p.ID, p.Detail)
		}
	}
	want := []string{
		ProblemLeaseExpired + " bad-nolease", ProblemLeaseExpired + " bad-lease",
		ProblemAgentGone + " bad-ghost",
		ProblemHolder + " bad-stray", ProblemHolder + " bad-token",
		ProblemHistory + " bad-hist", ProblemHistory + " bad-nohist",
		ProblemStaleControl + " bad-ctl-done", ProblemStaleControl + " bad-ctl-other",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("problems:\n got %v\nwant %v", got, want)
	}
	if p := byKey[ProblemLeaseExpired+" bad-lease"]; p.Past < 5*time.Minute || p.Past > 10*time.Minute || !strings.Contains(p.Detail, "expired 5m") || p.Agent != "w1" {
		t.Errorf("expired lease: past %v, %q", p.Past, p.Detail)
	}
	if p := byKey[ProblemLeaseExpired+" bad-nolease"]; !strings.Contains(p.Detail, "no lease") {
		t.Errorf("no lease: %q", p.Detail)
	}
	if p := byKey[ProblemAgentGone+" bad-ghost"]; !strings.Contains(p.Detail, "agent ghost, which has no row") {
		t.Errorf("agent gone: %q", p.Detail)
	}
	if p := byKey[ProblemHolder+" bad-token"]; !strings.Contains(p.Detail, "without claim token") || p.StrayLease {
		t.Errorf("no token: %+v", p)
	}
	if p := byKey[ProblemHolder+" bad-stray"]; !p.StrayLease || !strings.Contains(p.Detail, "on a queued job") {
		t.Errorf("stray lease: %+v", p)
	}
	if p := byKey[ProblemHistory+" bad-hist"]; p.Detail != "status succeeded, but its last event moved it to queued" {
		t.Errorf("history: %q", p.Detail)
	}
	if p := byKey[ProblemStaleControl+" bad-ctl-done"]; !strings.Contains(p.Detail, "hold request left on a succeeded job") {
		t.Errorf("control on a finished job: %q", p.Detail)
	}

	// A grace longer than the lease's lateness leaves it unreported
	// (watchdogd waits for its own grace too).
	r, err = s.Check(ctx, CheckOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Problems {
		if p.ID == "bad-lease" {
			t.Errorf("reported within the grace: %+v", p)
		}
	}

	// The repairs: a stale request and a stray lease are cleared, each
	// only while it is still what the check saw.
	if err := s.ClearStaleControl(ctx, byKey[ProblemStaleControl+" bad-ctl-done"]); err != nil {
		t.Fatal(err)
	}
	if err := s.ClearStaleControl(ctx, byKey[ProblemStaleControl+" bad-ctl-done"]); !errors.Is(err, ErrChanged) {
		t.Fatalf("clearing it twice: %v, want ErrChanged", err)
	}
	if err := s.ClearLease(ctx, "bad-stray"); err != nil {
		t.Fatal(err)
	}
	if err := s.ClearLease(ctx, "bad-lease"); !errors.Is(err, ErrChanged) {
		t.Fatalf("clearing a running job's lease: %v, want ErrChanged", err)
	}
	r, err = s.Check(ctx, CheckOptions{Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, p := range r.Problems {
		got = append(got, p.Kind+" "+p.ID)
	}
	sort.Strings(got)
	for _, gone := range []string{ProblemStaleControl + " bad-ctl-done", ProblemHolder + " bad-stray"} {
		if i := sort.SearchStrings(got, gone); i < len(got) && got[i] == gone {
			t.Errorf("%s still reported after its repair", gone)
		}
	}
}

// A database at another schema version is reported as such.
func TestCheckSchemaProblem(t *testing.T) {
	t.Parallel()
	if _, ok := SchemaProblem(SchemaVersion()); ok {
		t.Fatal("this build's version reported")
	}
	for v, want := range map[int]string{0: "no farro schema", SchemaVersion() - 1: "older than", SchemaVersion() + 1: "newer than"} {
		p, ok := SchemaProblem(v)
		if !ok || p.Kind != ProblemSchema || !strings.Contains(p.Detail, want) {
			t.Errorf("version %d: %+v, want %q", v, p, want)
		}
	}
	s, url := newStore(t)
	exec := sqlConn(t, url)
	if _, err := exec.Exec(ctxT(t), `INSERT INTO farro_schema_version (version, name) VALUES ($1, 'future.sql')`, SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	r, err := s.Check(ctxT(t), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 1 || r.Problems[0].Kind != ProblemSchema || r.SchemaVersion != SchemaVersion()+1 {
		t.Fatalf("problems %+v, schema %d", r.Problems, r.SchemaVersion)
	}
}

// Gauges counts every state (zeros included), the queued jobs by kind,
// and the oldest queued job's created_at.
func TestGauges(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := ctxT(t)
	submit(t, s, job.SubmitRequest{ID: "g1"})
	submit(t, s, job.SubmitRequest{ID: "g2", Kind: "exec"}, job.SubmitRequest{ID: "g3"})
	claimOne(t, s, "w1", time.Hour) // g1
	g, err := s.Gauges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.States) != len(job.States) || g.States[job.Queued] != 2 || g.States[job.InProgress] != 1 || g.States[job.Killed] != 0 {
		t.Errorf("states: %v", g.States)
	}
	if len(g.QueuedKinds) != 2 || g.QueuedKinds["exec"] != 1 || g.QueuedKinds["noop"] != 1 {
		t.Errorf("queued kinds: %v", g.QueuedKinds)
	}
	g2, _ := s.Get(ctx, "g2")
	if !g.OldestQueued.Equal(g2.CreatedAt) || g.At.IsZero() {
		t.Errorf("oldest queued %v, want g2's %v (at %v)", g.OldestQueued, g2.CreatedAt, g.At)
	}
}

// RecoverJobs takes only the jobs it is given, by Recover's rules: an
// expired lease of another job, or a job of the list whose lease still
// runs, is left alone.
func TestRecoverJobsTakesOnlyThoseListed(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	ctx := ctxT(t)
	submit(t, s, job.SubmitRequest{ID: "rj-a"})
	submit(t, s, job.SubmitRequest{ID: "rj-b"})
	submit(t, s, job.SubmitRequest{ID: "rj-c"})
	for range 3 {
		claimOne(t, s, "w1", time.Hour)
	}
	if _, err := sqlConn(t, url).Exec(ctx, `UPDATE jobs SET lease_until = now() - interval '1 minute' WHERE id IN ('rj-a', 'rj-b')`); err != nil {
		t.Fatal(err)
	}
	outs, err := s.RecoverJobs(ctx, []string{"rj-a", "rj-c"}, store.RecoverOptions{Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || outs[0].ID != "rj-a" || outs[0].To != job.Stale {
		t.Fatalf("outcomes: %+v", outs)
	}
	for id, want := range map[string]job.State{"rj-a": job.Stale, "rj-b": job.InProgress, "rj-c": job.InProgress} {
		if got := status(t, s, id); got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	if outs, err := s.RecoverJobs(ctx, nil, store.RecoverOptions{}); err != nil || len(outs) != 0 {
		t.Errorf("no jobs: %v %v", outs, err)
	}
}
