package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// cutter terminates every backend connected to the store's database
// (pg_terminate_backend, waiting until each is gone), as a network cut
// or a database failover would.
func cutter(t *testing.T, s *Store) func() {
	var db string
	if err := s.pool.QueryRow(ctxT(t), `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	admin := sqlConn(t, testpg.Start(t))
	return func() {
		var n int
		if err := admin.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000))
			FROM (SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() OFFSET 0) AS b`, db).Scan(&n); err != nil || n == 0 {
			t.Errorf("terminating %s's backends: %d (%v)", db, n, err)
		}
	}
}

// eventually calls fn until it succeeds (the pool reconnects) or the
// deadline passes; it returns how many calls failed.
func eventually(t *testing.T, what string, fn func() error) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for fails := 0; ; fails++ {
		err := fn()
		if err == nil {
			return fails
		}
		if store.Lost(err) || time.Now().After(deadline) {
			t.Fatalf("%s after the cut: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A connection cut inside a claim's transaction: the claim fails,
// nothing of it is applied (the job is queued, attempt not counted, no
// event), and the next claim works.
func TestConnectionCutDuringClaim(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	j := submit(t, s, job.SubmitRequest{})[0]
	cut := cutter(t, s)
	s.testHookBeforeCommit = func(op string) {
		if op == "claim" {
			s.testHookBeforeCommit = nil
			cut()
		}
	}
	h := job.Holder{Actor: "agentd/w", Agent: "w"}
	cs, err := s.Claim(ctxT(t), h, store.ClaimOptions{Max: 1})
	if err == nil || len(cs) != 0 {
		t.Fatalf("claim cut mid-transaction: %v %v", cs, err)
	}
	var got *job.Job
	eventually(t, "get", func() (err error) { got, err = s.Get(ctxT(t), j.ID); return err })
	if got.Status != job.Queued || got.Attempts != 0 || got.ClaimToken != "" {
		t.Fatalf("half-applied claim: %+v", got)
	}
	if evs, _ := s.History(ctxT(t), j.ID); len(evs) != 1 {
		t.Fatalf("history %+v", evs)
	}
	c := claimOne(t, s, "w", time.Minute)
	if c.Job().ID != j.ID || c.Job().Attempts != 1 {
		t.Fatalf("claim after the cut: %+v", c.Job())
	}
}

// A heartbeat across a cut fails without losing the claim, and the next
// one renews the lease.
func TestConnectionCutDuringHeartbeat(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	submit(t, s, job.SubmitRequest{})
	c := claimOne(t, s, "w", time.Minute)
	before := *c.Job().LastHeartbeat
	cutter(t, s)()
	eventually(t, "heartbeat", func() error { return c.Heartbeat(ctxT(t)) })
	if !c.Job().LastHeartbeat.After(before) {
		t.Fatalf("last_heartbeat %v not after %v", c.Job().LastHeartbeat, before)
	}
	if err := c.Commit(ctxT(t), job.Succeeded, "done", nil); err != nil {
		t.Fatal(err)
	}
}

// A commit cut before its transaction commits changes nothing and may be
// called again; one cut after the server committed (its reply lost) is
// found done by the second call.
func TestConnectionCutDuringCommit(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	js := submit(t, s, job.SubmitRequest{ID: "a-cut-before"}, job.SubmitRequest{ID: "b-cut-after"})
	cut := cutter(t, s)
	c := claimOne(t, s, "w", time.Minute)
	if c.Job().ID != js[0].ID {
		t.Fatalf("claimed %s", c.Job().ID)
	}
	s.testHookBeforeCommit = func(op string) {
		if op == "commit" {
			s.testHookBeforeCommit = nil
			cut()
		}
	}
	if err := c.Commit(ctxT(t), job.Succeeded, "done", nil); err == nil || store.Lost(err) {
		t.Fatalf("commit cut mid-transaction: %v", err)
	}
	var got *job.Job
	eventually(t, "get", func() (err error) { got, err = s.Get(ctxT(t), c.Job().ID); return err })
	if got.Status != job.InProgress || got.ClaimToken != c.Token() {
		t.Fatalf("half-applied commit: %+v", got)
	}
	eventually(t, "commit", func() error { return c.Commit(ctxT(t), job.Succeeded, "done", nil) })
	if got, _ := s.Get(ctxT(t), c.Job().ID); got.Status != job.Succeeded {
		t.Fatalf("after the second commit: %+v", got)
	}

	// The reply lost: the row says the commit happened.
	c2 := claimOne(t, s, "w", time.Minute)
	c2i := c2.(*claim)
	c2i.committed = &job.Job{Status: job.Failed}
	if _, err := sqlConn(t, url).Exec(ctxT(t), `UPDATE jobs SET status = 'failed' WHERE id = $1`, c2.Job().ID); err != nil {
		t.Fatal(err)
	}
	if err := c2.Commit(ctxT(t), job.Failed, "exit 1", nil); err != nil {
		t.Fatalf("commit found done: %v", err)
	}
	if err := c2.Fence(ctxT(t)); !store.Lost(err) {
		t.Fatalf("fence after commit: %v", err)
	}
}

// NOTIFY on submit wakes a waiter at once; without one the wait ends at
// its timeout (the polling fallback).
func TestNotifyWakesWaiter(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	start := time.Now()
	woke, err := s.WaitQueued(ctxT(t), 200*time.Millisecond)
	if err != nil || woke || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("idle wait: woke %v err %v after %v", woke, err, time.Since(start))
	}
	type res struct {
		woke bool
		err  error
	}
	done := make(chan res, 1)
	go func() {
		w, err := s.WaitQueued(context.Background(), 15*time.Second)
		done <- res{w, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for s.wait.waiters() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never started waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
	submitted := time.Now()
	submit(t, s, job.SubmitRequest{})
	select {
	case r := <-done:
		if !r.woke || r.err != nil {
			t.Fatalf("waiter: %+v", r)
		}
		if d := time.Since(submitted); d > 5*time.Second {
			t.Fatalf("woken %v after the submit", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the submit did not wake the waiter")
	}
	// A cut listener reconnects: a later submit still wakes a waiter.
	cutter(t, s)()
	deadline = time.Now().Add(10 * time.Second)
	for {
		go func() {
			w, err := s.WaitQueued(context.Background(), 2*time.Second)
			done <- res{w, err}
		}()
		for s.wait.waiters() == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		eventually(t, "submit", func() error {
			_, errs := s.Submit(ctxT(t), []job.SubmitRequest{{Kind: "noop", Prompt: []byte("{}")}})
			return errs[0]
		})
		if r := <-done; r.woke {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no waiter woken after the listener's connection was cut")
		}
	}
}

// A notification wakes one waiter, not the herd of an agent's idle slots;
// a claim that filled its batch passes the wake-up on to the next waiter
// (the queue may hold more), and one that did not leaves the rest waiting.
func TestNotifyWakesOneWaiterAndFullClaimsPassItOn(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	const waiters = 3
	woken := make(chan int, waiters)
	for i := 0; i < waiters; i++ {
		go func() {
			if w, _ := s.WaitQueued(context.Background(), 30*time.Second); w {
				woken <- i
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.wait.waiters() < waiters {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters waiting, want %d", s.wait.waiters(), waiters)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Three jobs, one statement: one notification.
	submit(t, s, job.SubmitRequest{}, job.SubmitRequest{}, job.SubmitRequest{})
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("the submit woke no waiter")
	}
	notWoken := func(what string) {
		t.Helper()
		select {
		case i := <-woken:
			t.Fatalf("%s: waiter %d woken too", what, i)
		case <-time.After(300 * time.Millisecond):
		}
	}
	notWoken("one notification")
	if n := s.wait.waiters(); n != waiters-1 {
		t.Fatalf("after one notification %d waiters still wait, want %d", n, waiters-1)
	}
	// A claim that took all it asked for wakes the next waiter.
	h := job.Holder{Actor: "agentd/a1", Agent: "a1"}
	cs, err := s.Claim(ctxT(t), h, store.ClaimOptions{Max: 2})
	if err != nil || len(cs) != 2 {
		t.Fatalf("claim of 2: %d jobs, %v", len(cs), err)
	}
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("a full claim did not pass the wake-up on")
	}
	// One that took less than it asked for does not.
	cs, err = s.Claim(ctxT(t), h, store.ClaimOptions{Max: 2})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim of the last job: %d jobs, %v", len(cs), err)
	}
	select {
	case i := <-woken:
		t.Fatalf("a short claim woke waiter %d", i)
	case <-time.After(300 * time.Millisecond):
	}
	if n := s.wait.waiters(); n != 1 {
		t.Fatalf("%d waiters still wait, want 1", n)
	}
}
