package pgstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// Many claimers at once: every job is claimed exactly once (FOR UPDATE
// SKIP LOCKED), with attempt 1 and a token of its own.
func TestClaimRaceExactlyOnce(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	const n = 120
	reqs := make([]job.SubmitRequest, n)
	submit(t, s, reqs...)
	var mu sync.Mutex
	seen := map[string]int{}
	tokens := map[string]bool{}
	var problems []error
	fail := func(err error) {
		mu.Lock()
		problems = append(problems, err)
		mu.Unlock()
	}
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			h := job.Holder{Actor: fmt.Sprintf("agentd/a%d", w), Agent: fmt.Sprintf("a%d", w)}
			for claims := 0; claims <= n; claims++ {
				cs, err := s.Claim(ctx, h, store.ClaimOptions{Max: 4, Lease: time.Minute})
				if err != nil {
					fail(err)
					return
				}
				if len(cs) == 0 {
					return
				}
				mu.Lock()
				for _, c := range cs {
					seen[c.Job().ID]++
					tokens[c.Token()] = true
					if c.Job().Attempts != 1 || c.Job().Agent != h.Agent {
						problems = append(problems, fmt.Errorf("claimed %+v", c.Job()))
					}
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	for _, err := range problems {
		t.Error(err)
	}
	if len(seen) != n || len(tokens) != n {
		t.Fatalf("%d jobs claimed, %d tokens; want %d", len(seen), len(tokens), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("%s claimed %d times", id, k)
		}
	}
	counts, err := s.Counts(ctxT(t))
	if err != nil || counts[job.InProgress] != n || counts[job.Queued] != 0 {
		t.Fatalf("counts %v (%v)", counts, err)
	}
}

// Best first: priority, then age (ID); a deferred job only when due; the
// kinds filter.
func TestClaimOrderDueAndKinds(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	submit(t, s,
		job.SubmitRequest{ID: "a-low", Priority: 0},
		job.SubmitRequest{ID: "b-high", Priority: 5},
		job.SubmitRequest{ID: "c-low", Priority: 0},
		job.SubmitRequest{ID: "d-exec", Kind: "exec", Priority: 9},
		job.SubmitRequest{ID: "e-later", Priority: 9, NotBefore: time.Now().Add(time.Hour)},
	)
	if st := status(t, s, "e-later"); st != job.Deferred {
		t.Fatalf("e-later is %s, want deferred", st)
	}
	h := job.Holder{Actor: "agentd/w", Agent: "w"}
	var got []string
	for _, max := range []int{1, 1, 10} { // one at a time: the database's order, not a sort after
		cs, err := s.Claim(ctxT(t), h, store.ClaimOptions{Max: max, Kinds: []string{"noop"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			got = append(got, c.Job().ID)
		}
	}
	if strings.Join(got, " ") != "b-high a-low c-low" {
		t.Fatalf("claimed %q", got)
	}
	// Made due (managerd's promotion), it is claimed.
	if _, err := sqlConn(t, url).Exec(ctxT(t), `UPDATE jobs SET not_before = now() - interval '1 second' WHERE id = 'e-later'`); err != nil {
		t.Fatal(err)
	}
	var due []string
	if err := s.List(ctxT(t), store.Filter{States: []job.State{job.Deferred}, DueBy: time.Now()}, func(j *job.Job) error { due = append(due, j.ID); return nil }); err != nil || len(due) != 1 {
		t.Fatalf("due: %v %v", due, err)
	}
	if _, err := s.Move(ctxT(t), "e-later", job.Deferred, job.Queued, "managerd", "due", nil); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Claim(ctxT(t), h, store.ClaimOptions{Max: 10})
	if err != nil || len(cs) != 2 || cs[0].Job().ID != "d-exec" || cs[1].Job().ID != "e-later" {
		t.Fatalf("second claim: %v %v", cs, err)
	}
}

// A claim whose lease has not run out is never recovered; once it has (on
// the database's clock), Recover moves the job to stale and the old
// holder's every write is fenced.
func TestRecoverFencesExpiredClaim(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	j := submit(t, s, job.SubmitRequest{})[0]
	c := claimOne(t, s, "w1", 300*time.Millisecond)
	outs, err := s.Recover(ctxT(t), store.RecoverOptions{Actor: "watchdogd", SilentAfter: time.Hour})
	if err != nil || len(outs) != 0 {
		t.Fatalf("recover within the lease: %v %v", outs, err)
	}
	if err := c.Heartbeat(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Let the lease run out on the database's clock.
	deadline := time.Now().Add(10 * time.Second)
	for {
		outs, err = s.Recover(ctxT(t), store.RecoverOptions{Actor: "watchdogd"})
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(outs) != 1 || outs[0].ID != j.ID || outs[0].To != job.Stale || !strings.Contains(outs[0].Detail, "lease of agent w1 expired") {
		t.Fatalf("outcomes %+v", outs)
	}
	for name, err := range map[string]error{
		"heartbeat":      c.Heartbeat(ctxT(t)),
		"fence":          c.Fence(ctxT(t)),
		"commit":         c.Commit(ctxT(t), job.Succeeded, "done", nil),
		"record handler": c.RecordHandler(ctxT(t), proc.Self()),
		"pending":        func() error { _, err := c.PendingControl(ctxT(t)); return err }(),
	} {
		if !store.Lost(err) {
			t.Errorf("%s of a recovered claim: %v (want Lost)", name, err)
		}
	}
	got, err := s.Get(ctxT(t), j.ID)
	if err != nil || got.Status != job.Stale {
		t.Fatalf("job %+v %v", got, err)
	}
	var lease *time.Time
	if err := sqlConn(t, url).QueryRow(ctxT(t), `SELECT lease_until FROM jobs WHERE id = $1`, j.ID).Scan(&lease); err != nil || lease != nil {
		t.Fatalf("lease_until %v %v after recovery", lease, err)
	}
	evs, err := s.History(ctxT(t), j.ID)
	if err != nil || len(evs) != 3 || evs[2].From != job.InProgress || evs[2].To != job.Stale || evs[2].Actor != "watchdogd" {
		t.Fatalf("history %+v %v", evs, err)
	}
	// Requeued and claimed again: the new claim commits, the old one stays fenced.
	if _, err := s.Move(ctxT(t), j.ID, job.Stale, job.Queued, "managerd", "requeued", nil); err != nil {
		t.Fatal(err)
	}
	c2 := claimOne(t, s, "w2", time.Minute)
	if c2.Token() == c.Token() || c2.Job().Attempts != 2 {
		t.Fatalf("second claim %+v", c2.Job())
	}
	if err := c.Commit(ctxT(t), job.Succeeded, "late", nil); !store.Lost(err) {
		t.Fatalf("old claim's commit: %v", err)
	}
	if err := c2.Commit(ctxT(t), job.Succeeded, "done", nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctxT(t), j.ID); got.Status != job.Succeeded || got.Reason != "done" {
		t.Fatalf("final %+v", got)
	}
}

// Without SilentAfter the lease (plus the grace) is the rule; with it, a
// holder that has not heart-beaten for that long is taken even within its
// lease (the caller judged it silent, as watchdogd does on a spool).
func TestRecoverLeaseGraceAndSilence(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	j := submit(t, s, job.SubmitRequest{})[0]
	claimOne(t, s, "w1", time.Hour)
	c := sqlConn(t, url)
	if _, err := c.Exec(ctxT(t), `UPDATE jobs SET last_heartbeat = now() - interval '10 minutes', lease_until = now() - interval '1 second' WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	if outs, err := s.Recover(ctxT(t), store.RecoverOptions{Grace: time.Hour}); err != nil || len(outs) != 0 {
		t.Fatalf("lease passed, within grace: %v %v", outs, err)
	}
	if outs, err := s.Recover(ctxT(t), store.RecoverOptions{Grace: time.Hour, SilentAfter: time.Hour}); err != nil || len(outs) != 0 {
		t.Fatalf("within grace, heart-beaten within SilentAfter: %v %v", outs, err)
	}
	// Silence is judged past SilentAfter plus the grace.
	if outs, err := s.Recover(ctxT(t), store.RecoverOptions{Grace: 10 * time.Minute, SilentAfter: time.Minute}); err != nil || len(outs) != 0 {
		t.Fatalf("silent for 10m, SilentAfter 1m plus grace 10m: %v %v", outs, err)
	}
	outs, err := s.Recover(ctxT(t), store.RecoverOptions{Grace: 5 * time.Minute, SilentAfter: time.Minute})
	if err != nil || len(outs) != 1 || !strings.Contains(outs[0].Detail, "agent w1 silent for 10m") {
		t.Fatalf("silent: %+v %v", outs, err)
	}
}

// Commit is fenced, checks the transitions map and records the outcome
// and its event in one transaction.
func TestCommitAndControl(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	j := submit(t, s, job.SubmitRequest{})[0]
	c := claimOne(t, s, "w1", time.Minute)
	if err := c.Commit(ctxT(t), job.Deferred, "", nil); !errors.Is(err, job.ErrIllegal) {
		t.Fatalf("commit to deferred: %v", err)
	}
	if err := s.RequestControl(ctxT(t), j.ID, job.Control{Action: job.ControlHold, Reason: "look"}); err != nil {
		t.Fatal(err)
	}
	ctl, err := c.PendingControl(ctxT(t))
	if err != nil || ctl == nil || ctl.ClaimToken != c.Token() || ctl.Attempt != 1 || ctl.Actor != "farroctl" {
		t.Fatalf("pending %+v %v", ctl, err)
	}
	to, reason, _ := ctl.Target()
	if err := c.Commit(ctxT(t), to, reason, func(nj *job.Job) { ctl.Refund(nj) }); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctxT(t), j.ID)
	if got.Status != job.Held || got.Attempts != 0 || got.Reason != "held by operator: look" {
		t.Fatalf("held %+v", got)
	}
	var left bool
	if err := sqlConn(t, url).QueryRow(ctxT(t), `SELECT control IS NOT NULL FROM jobs WHERE id = $1`, j.ID).Scan(&left); err != nil || left {
		t.Fatalf("the request the commit fulfilled is still with the job (%v)", err)
	}
	if err := s.RequestControl(ctxT(t), j.ID, job.Control{Action: job.ControlKill}); !errors.Is(err, job.ErrState) {
		t.Fatalf("control of a held job: %v", err)
	}
	if err := s.RequestControl(ctxT(t), "nope", job.Control{Action: job.ControlKill}); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("control of a missing job: %v", err)
	}
	// Released, the request does not come back (the commit fulfilled it).
	if _, err := s.Move(ctxT(t), j.ID, job.Held, job.Queued, "farroctl", "released", nil); err != nil {
		t.Fatal(err)
	}
	c2 := claimOne(t, s, "w1", time.Minute)
	if ctl, err := c2.PendingControl(ctxT(t)); err != nil || ctl != nil {
		t.Fatalf("pending after release: %+v %v", ctl, err)
	}
}

// A request that arrives as the attempt finishes travels with the job;
// the next Claim applies it instead of running the job.
func TestClaimAppliesTravellingRequest(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	j := submit(t, s, job.SubmitRequest{})[0]
	c := claimOne(t, s, "w1", time.Minute)
	if err := s.RequestControl(ctxT(t), j.ID, job.Control{Action: job.ControlCancel}); err != nil {
		t.Fatal(err)
	}
	// The agent releases the job without having seen the request.
	if err := c.Commit(ctxT(t), job.Queued, "released", func(nj *job.Job) { nj.Attempts-- }); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Claim(ctxT(t), job.Holder{Actor: "agentd/w2", Agent: "w2"}, store.ClaimOptions{Max: 5})
	if err != nil || len(cs) != 0 {
		t.Fatalf("claim: %v %v", cs, err)
	}
	got, _ := s.Get(ctxT(t), j.ID)
	if got.Status != job.Killed || got.Reason != job.ReasonCancelled {
		t.Fatalf("job %+v", got)
	}
}

// Remove and Expire delete only terminal jobs, Expire only those finished
// before the cutoff; Move refuses a job another transaction has locked.
func TestRemoveExpireBusy(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	js := submit(t, s, job.SubmitRequest{ID: "one"}, job.SubmitRequest{ID: "two"})
	if _, err := s.Remove(ctxT(t), "one", "farroctl"); !errors.Is(err, job.ErrState) {
		t.Fatalf("remove queued: %v", err)
	}
	if _, err := s.Move(ctxT(t), "one", job.Queued, job.Killed, "farroctl", "killed by operator", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Expire(ctxT(t), "one", "managerd", time.Now().Add(-time.Hour)); !errors.Is(err, job.ErrNotExpired) {
		t.Fatalf("expire too recent: %v", err)
	}
	if _, err := s.Expire(ctxT(t), "one", "managerd", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctxT(t), "one"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("get removed: %v", err)
	}
	if _, err := s.History(ctxT(t), "one"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("history of removed: %v", err)
	}
	if _, errs := s.Submit(ctxT(t), []job.SubmitRequest{{ID: js[1].ID, Kind: "noop", Prompt: []byte("{}")}}); !errors.Is(errs[0], job.ErrDuplicate) {
		t.Fatalf("duplicate submit: %v", errs[0])
	}
	tx, err := sqlConn(t, url).Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctxT(t), `SELECT 1 FROM jobs WHERE id = 'two' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Move(ctxT(t), "two", job.Queued, job.Held, "farroctl", "held", nil); !errors.Is(err, store.ErrBusy) {
		t.Fatalf("move of a locked job: %v", err)
	}
}

// A claim whose working directory cannot be made (here: a file where the
// agent's directory must be) fails and gives its jobs back at once,
// their attempt not counted.
func TestClaimWithoutWorkingDirectoryReleases(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	j := submit(t, s, job.SubmitRequest{})[0]
	if err := os.WriteFile(filepath.Join(s.scratch, "w"), []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Claim(ctxT(t), job.Holder{Actor: "agentd/w", Agent: "w"}, store.ClaimOptions{Max: 2})
	if err == nil || len(cs) != 0 || !strings.Contains(err.Error(), "working directory") {
		t.Fatalf("claim: %v %v", cs, err)
	}
	got, _ := s.Get(ctxT(t), j.ID)
	if got.Status != job.Queued || got.Attempts != 0 {
		t.Fatalf("job after the failed claim: %+v", got)
	}
	c := claimOne(t, s, "w2", time.Minute)
	if c.Job().ID != j.ID || c.Dir() != filepath.Join(s.scratch, "w2", j.ID) {
		t.Fatalf("claim by another agent: %+v dir %s", c.Job(), c.Dir())
	}
	if fi, err := os.Stat(c.Dir()); err != nil || !fi.IsDir() {
		t.Fatalf("working directory: %v", err)
	}
}

// A request no one can read (written by hand, or by a newer farro) never
// blocks the job: the claim that finds it drops it and runs the job, as
// a spool's claim does with an unreadable control.json.
func TestUnreadableRequestIsDropped(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	j := submit(t, s, job.SubmitRequest{})[0]
	c := sqlConn(t, url)
	if _, err := c.Exec(ctxT(t), `UPDATE jobs SET control = '{"action":"explode"}' WHERE id = $1`, j.ID); err != nil {
		t.Fatal(err)
	}
	cl := claimOne(t, s, "w", time.Minute)
	if ctl, err := cl.PendingControl(ctxT(t)); err != nil || ctl != nil {
		t.Fatalf("pending: %+v %v", ctl, err)
	}
	var left bool
	if err := c.QueryRow(ctxT(t), `SELECT control IS NOT NULL FROM jobs WHERE id = $1`, j.ID).Scan(&left); err != nil || left {
		t.Fatalf("the unreadable request is still with the job (%v)", err)
	}
	if err := cl.Commit(ctxT(t), job.Succeeded, "done", nil); err != nil {
		t.Fatal(err)
	}
}

// Among equal priorities the older job goes first: the time its ID
// carries, or, for an ID without one, when it was submitted — not the
// ID's alphabetical order.
func TestClaimOrderByAge(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	submit(t, s, job.SubmitRequest{ID: "zzz-first"})
	submit(t, s, job.SubmitRequest{ID: "aaa-second"})
	submit(t, s, job.SubmitRequest{ID: "20200101T000000.000000Z-abcdef"}) // its ID says 2020
	var got []string
	for i := 0; i < 3; i++ {
		got = append(got, claimOne(t, s, "w", time.Minute).Job().ID)
	}
	if strings.Join(got, " ") != "20200101T000000.000000Z-abcdef zzz-first aaa-second" {
		t.Fatalf("claim order %q", got)
	}
}
