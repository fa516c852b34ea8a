// Package storetest is the conformance suite of the store seam: every
// store.Store (the spool's, PostgreSQL's) passes Run. The suite knows
// nothing of where a store keeps its jobs: it checks what the store
// returns (Get, History, List, Counts) against what it was asked to do,
// never against hard-coded IDs or paths.
//
// Where it needs a holder judged gone, it stops heart-beating and runs
// Recover with a tiny RecoverOptions.SilentAfter, the rule every store
// honours (see store.RecoverOptions).
package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// Run runs the conformance suite. open returns a fresh, empty store for
// one subtest (subtests run in parallel, each with its own store); it
// registers the store's cleanup with t.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st store.Store)
	}{
		{"submit", testSubmit},
		{"claim-order", testClaimOrder},
		{"claim-kinds-max", testClaimKindsMax},
		{"claim-not-due", testClaimNotDue},
		{"claim-race", testClaimRace},
		{"heartbeat", testHeartbeat},
		{"commit", testCommit},
		{"fencing", testFencing},
		{"control", testControl},
		{"control-races-commit", testControlRacesCommit},
		{"move", testMove},
		{"transitions-map", testTransitionsMap},
		{"retry-remove-expire", testRetryRemoveExpire},
		{"list-counts", testListCounts},
		{"list-by-finished", testListByFinished},
		{"history", testHistory},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

// Actors the suite writes as.
const (
	submitter = "storetest/submit"
	manager   = "storetest/manager"
	operator  = "storetest/operator"
	recoverer = "storetest/recover"
)

func holder(n int) job.Holder {
	return job.Holder{Actor: fmt.Sprintf("storetest/w%d", n), Agent: fmt.Sprintf("w%d", n)}
}

func req(kind string, prio int) job.SubmitRequest {
	return job.SubmitRequest{Kind: kind, Priority: prio, Prompt: []byte(`{"task":"x"}`), Actor: submitter}
}

// submit submits reqs and fails the test on any error.
func submit(t *testing.T, st store.Store, reqs ...job.SubmitRequest) []*job.Job {
	t.Helper()
	jobs, errs := st.Submit(t.Context(), reqs)
	if len(jobs) != len(reqs) || len(errs) != len(reqs) {
		t.Fatalf("Submit of %d: %d jobs, %d errors", len(reqs), len(jobs), len(errs))
	}
	for i, err := range errs {
		if err != nil || jobs[i] == nil {
			t.Fatalf("Submit %d: job %v, error %v", i, jobs[i], err)
		}
	}
	return jobs
}

func get(t *testing.T, st store.Store, id string) *job.Job {
	t.Helper()
	j, err := st.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	if j.ID != id {
		t.Fatalf("Get %s returned job %s", id, j.ID)
	}
	return j
}

func claim(t *testing.T, st store.Store, h job.Holder, opts store.ClaimOptions) []store.Claim {
	t.Helper()
	cs, err := st.Claim(t.Context(), h, opts)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return cs
}

// claimOne claims exactly one job, which must be id.
func claimOne(t *testing.T, st store.Store, h job.Holder, id string) store.Claim {
	t.Helper()
	cs := claim(t, st, h, store.ClaimOptions{Max: 1})
	if len(cs) != 1 || cs[0].Job().ID != id {
		t.Fatalf("Claim: want %s, got %v", id, claimIDs(cs))
	}
	return cs[0]
}

func commit(t *testing.T, c store.Claim, to job.State, reason string) {
	t.Helper()
	if err := c.Commit(t.Context(), to, reason, nil); err != nil {
		t.Fatalf("Commit %s -> %s: %v", c.Job().ID, to, err)
	}
}

func claimIDs(cs []store.Claim) []string {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.Job().ID)
	}
	return ids
}

// age is the age key of the claim order: the time the ID carries, else
// created_at.
func age(j *job.Job) time.Time {
	if t, ok := job.IDTime(j.ID); ok {
		return t
	}
	return j.CreatedAt
}

// claimOrder sorts jobs as Claim must hand them out: higher priority,
// then older, then ID.
func claimOrder(jobs []*job.Job) []string {
	js := slices.Clone(jobs)
	sort.Slice(js, func(a, b int) bool {
		x, y := js[a], js[b]
		if x.Priority != y.Priority {
			return x.Priority > y.Priority
		}
		if ax, ay := age(x), age(y); !ax.Equal(ay) {
			return ax.Before(ay)
		}
		return x.ID < y.ID
	})
	var ids []string
	for _, j := range js {
		ids = append(ids, j.ID)
	}
	return ids
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: want an error that is %q, got %v", what, target, err)
	}
}

func wantStatus(t *testing.T, st store.Store, id string, want job.State) *job.Job {
	t.Helper()
	j := get(t, st, id)
	if j.Status != want {
		t.Fatalf("%s: status %s (reason %q), want %s", id, j.Status, j.Reason, want)
	}
	return j
}

func testSubmit(t *testing.T, st store.Store) {
	ctx := t.Context()
	named := req("exec", 3)
	named.ID = "storetest-named"
	named.MaxAttempts = 5
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	deferred := req("exec", 0)
	deferred.NotBefore = later
	held := req("noop", 0)
	held.Held = true
	badKind := req("Not A Kind", 0)
	badPrompt := req("exec", 0)
	badPrompt.Prompt = []byte(`{"unterminated":`)
	plain := req("noop", 0)

	reqs := []job.SubmitRequest{named, badKind, deferred, badPrompt, held, plain}
	jobs, errs := st.Submit(ctx, reqs)
	if len(jobs) != len(reqs) || len(errs) != len(reqs) {
		t.Fatalf("Submit: %d jobs, %d errors for %d requests", len(jobs), len(errs), len(reqs))
	}
	for _, i := range []int{1, 3} {
		if errs[i] == nil || jobs[i] != nil {
			t.Errorf("request %d (bad kind or prompt) was accepted: %v, %v", i, jobs[i], errs[i])
		}
	}
	ids := map[string]bool{}
	for _, i := range []int{0, 2, 4, 5} {
		if errs[i] != nil || jobs[i] == nil {
			t.Fatalf("request %d refused: %v (a bad request must not stop the others)", i, errs[i])
		}
		id := jobs[i].ID
		if job.ValidateID(id) != nil || ids[id] {
			t.Fatalf("request %d: id %q invalid or repeated", i, id)
		}
		ids[id] = true
		g := get(t, st, id)
		if g.Kind != reqs[i].Kind || g.Priority != reqs[i].Priority || g.Attempts != 0 || g.MaxAttempts != reqs[i].MaxAttempts {
			t.Errorf("%s: got kind %s priority %d attempts %d max %d, want %s %d 0 %d", id, g.Kind, g.Priority, g.Attempts, g.MaxAttempts, reqs[i].Kind, reqs[i].Priority, reqs[i].MaxAttempts)
		}
		p, err := st.Prompt(ctx, id)
		if err != nil || string(p) != string(reqs[i].Prompt) {
			t.Errorf("%s: prompt %q, %v", id, p, err)
		}
	}
	if jobs[0].ID != named.ID {
		t.Errorf("named request got id %s", jobs[0].ID)
	}
	wantStatus(t, st, jobs[0].ID, job.Queued)
	wantStatus(t, st, jobs[5].ID, job.Queued)
	wantStatus(t, st, jobs[4].ID, job.Held)
	d := wantStatus(t, st, jobs[2].ID, job.Deferred)
	if d.NotBefore == nil || !d.NotBefore.Equal(later) {
		t.Errorf("deferred job: not_before %v, want %v", d.NotBefore, later)
	}

	// The same ID again: refused, and the job is unchanged.
	dup := req("noop", 9)
	dup.ID = named.ID
	dup.Prompt = []byte(`{"other":true}`)
	djobs, derrs := st.Submit(ctx, []job.SubmitRequest{dup})
	if djobs[0] != nil || !errors.Is(derrs[0], job.ErrDuplicate) {
		t.Fatalf("duplicate id: want job.ErrDuplicate, got %v, %v", djobs[0], derrs[0])
	}
	if g := get(t, st, named.ID); g.Kind != named.Kind || g.Priority != named.Priority {
		t.Errorf("duplicate submit changed the job: %+v", g)
	}
	if p, _ := st.Prompt(ctx, named.ID); string(p) != string(named.Prompt) {
		t.Errorf("duplicate submit changed the prompt: %s", p)
	}
	n, err := st.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n[job.Queued] != 2 || n[job.Deferred] != 1 || n[job.Held] != 1 {
		t.Errorf("counts after submit: %v", n)
	}
	if _, err := st.Get(ctx, "storetest-never-submitted"); !errors.Is(err, job.ErrNotFound) {
		t.Errorf("Get of an unknown id: %v, want job.ErrNotFound", err)
	}
}

func testClaimOrder(t *testing.T, st store.Store) {
	prios := []int{0, 5, 0, -1, 5, 2, 0, 2}
	var reqs []job.SubmitRequest
	for _, p := range prios {
		reqs = append(reqs, req("exec", p))
	}
	timeless := req("exec", 2)
	timeless.ID = "storetest-no-time-in-this-id"
	reqs = append(reqs, timeless)
	jobs := submit(t, st, reqs[:4]...)
	jobs = append(jobs, submit(t, st, reqs[4:]...)...)
	var all []*job.Job
	for _, j := range jobs {
		all = append(all, get(t, st, j.ID))
	}
	want := claimOrder(all)

	h := holder(1)
	first := claim(t, st, h, store.ClaimOptions{Max: 3})
	if len(first) != 3 {
		t.Fatalf("Claim Max 3 took %d", len(first))
	}
	rest := claim(t, st, h, store.ClaimOptions{Max: 100})
	got := append(claimIDs(first), claimIDs(rest)...)
	if !slices.Equal(got, want) {
		t.Fatalf("claim order:\n got %v\nwant %v", got, want)
	}
	if more := claim(t, st, h, store.ClaimOptions{Max: 5}); len(more) != 0 {
		t.Fatalf("Claim of an empty queue: %v", claimIDs(more))
	}
	tokens, corr := map[string]bool{}, map[string]bool{}
	for _, c := range append(first, rest...) {
		g := get(t, st, c.Job().ID)
		switch {
		case g.Status != job.InProgress:
			t.Errorf("%s: status %s after its claim", g.ID, g.Status)
		case g.Attempts != 1 || c.Job().Attempts != 1:
			t.Errorf("%s: attempts %d (claim says %d), want 1", g.ID, g.Attempts, c.Job().Attempts)
		case c.Token() == "" || c.Token() != g.ClaimToken || tokens[c.Token()]:
			t.Errorf("%s: token %q, job's claim_token %q (or repeated)", g.ID, c.Token(), g.ClaimToken)
		case g.CorrelationID == "" || corr[g.CorrelationID] || c.Job().CorrelationID != g.CorrelationID:
			t.Errorf("%s: correlation id %q (claim says %q, or repeated)", g.ID, g.CorrelationID, c.Job().CorrelationID)
		case g.Agent != h.Agent:
			t.Errorf("%s: agent %q, want %q", g.ID, g.Agent, h.Agent)
		}
		tokens[c.Token()], corr[g.CorrelationID] = true, true
		if p := c.Prompt(); string(p) != `{"task":"x"}` {
			t.Errorf("%s: claim's prompt %s", g.ID, p)
		}
	}
}

func testClaimKindsMax(t *testing.T, st store.Store) {
	var reqs []job.SubmitRequest
	for i := range 6 {
		reqs = append(reqs, req([]string{"kind.a", "kind.b", "kind.c"}[i%3], 0))
	}
	submit(t, st, reqs...)
	h := holder(1)
	cs := claim(t, st, h, store.ClaimOptions{Max: 10, Kinds: []string{"kind.b", "kind.c"}})
	if len(cs) != 4 {
		t.Fatalf("Claim of kinds b, c: %d claims, want 4", len(cs))
	}
	for _, c := range cs {
		if k := c.Job().Kind; k != "kind.b" && k != "kind.c" {
			t.Errorf("Claim of kinds b, c took a job of kind %s", k)
		}
	}
	one := claim(t, st, h, store.ClaimOptions{Max: 1})
	if len(one) != 1 || one[0].Job().Kind != "kind.a" {
		t.Fatalf("Claim Max 1: %v", claimIDs(one))
	}
	zero := claim(t, st, h, store.ClaimOptions{Max: 0}) // taken as 1
	if len(zero) != 1 {
		t.Fatalf("Claim Max 0: %d claims, want 1", len(zero))
	}
	n, err := st.Counts(t.Context())
	if err != nil || n[job.InProgress] != 6 || n[job.Queued] != 0 {
		t.Fatalf("counts: %v, %v", n, err)
	}
}

func testClaimNotDue(t *testing.T, st store.Store) {
	d := req("exec", 10)
	d.NotBefore = time.Now().Add(time.Hour)
	hd := req("exec", 10)
	hd.Held = true
	jobs := submit(t, st, d, hd, req("exec", 0))
	cs := claim(t, st, holder(1), store.ClaimOptions{Max: 10})
	if len(cs) != 1 || cs[0].Job().ID != jobs[2].ID {
		t.Fatalf("Claim took %v, want only the queued job %s", claimIDs(cs), jobs[2].ID)
	}
	wantStatus(t, st, jobs[0].ID, job.Deferred)
	wantStatus(t, st, jobs[1].ID, job.Held)
	// Due once moved to queued (managerd's promotion).
	if _, err := st.Move(t.Context(), jobs[0].ID, job.Deferred, job.Queued, manager, "due", nil); err != nil {
		t.Fatal(err)
	}
	claimOne(t, st, holder(1), jobs[0].ID)
}

func testClaimRace(t *testing.T, st store.Store) {
	const jobs, workers = 60, 8
	var reqs []job.SubmitRequest
	for i := range jobs {
		reqs = append(reqs, req("exec", i%3))
	}
	submitted := submit(t, st, reqs...)
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			h := holder(w)
			for {
				cs, err := st.Claim(t.Context(), h, store.ClaimOptions{Max: 3})
				if err != nil {
					errs <- err
					return
				}
				if len(cs) == 0 {
					return
				}
				for _, c := range cs {
					mu.Lock()
					claimed[c.Job().ID]++
					mu.Unlock()
					if err := c.Commit(t.Context(), job.Succeeded, "done", nil); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("worker: %v", err)
	}
	for _, j := range submitted {
		if n := claimed[j.ID]; n != 1 {
			t.Errorf("%s claimed %d times", j.ID, n)
		}
		if g := wantStatus(t, st, j.ID, job.Succeeded); g.Attempts != 1 {
			t.Errorf("%s: attempts %d", j.ID, g.Attempts)
		}
	}
	if len(claimed) != jobs {
		t.Errorf("%d jobs claimed, want %d", len(claimed), jobs)
	}
}

func testHeartbeat(t *testing.T, st store.Store) {
	j := submit(t, st, req("exec", 0))[0]
	c := claimOne(t, st, holder(1), j.ID)
	before := get(t, st, j.ID)
	if before.LastHeartbeat == nil {
		t.Fatal("a claimed job has no last_heartbeat")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := c.Heartbeat(t.Context()); err != nil {
			t.Fatalf("Heartbeat: %v", err)
		}
		now := get(t, st, j.ID)
		if now.Status != job.InProgress || now.ClaimToken != c.Token() || now.Attempts != 1 {
			t.Fatalf("after a heartbeat: status %s token %q attempts %d", now.Status, now.ClaimToken, now.Attempts)
		}
		if now.LastHeartbeat != nil && now.LastHeartbeat.After(*before.LastHeartbeat) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("last_heartbeat never moved past %v", before.LastHeartbeat)
		}
	}
	if err := c.Fence(t.Context()); err != nil {
		t.Fatalf("Fence of the current claim: %v", err)
	}
	commit(t, c, job.Succeeded, "done")
}

func testCommit(t *testing.T, st store.Store) {
	targets := []job.State{job.Succeeded, job.Failed, job.Stale, job.Held, job.Killed, job.Queued}
	var reqs []job.SubmitRequest
	for i := range targets {
		reqs = append(reqs, req("exec", len(targets)-i)) // claimed in this order
	}
	jobs := submit(t, st, reqs...)
	for i, to := range targets {
		c := claimOne(t, st, holder(1), jobs[i].ID)
		code := 3
		reason := "to " + string(to)
		if err := c.Commit(t.Context(), to, reason, func(j *job.Job) { j.Error, j.ExitCode = "boom", &code }); err != nil {
			t.Fatalf("Commit to %s: %v", to, err)
		}
		g := wantStatus(t, st, jobs[i].ID, to)
		if g.Reason != reason || g.Error != "boom" || g.ExitCode == nil || *g.ExitCode != code || g.Attempts != 1 {
			t.Errorf("after a commit to %s: reason %q error %q exit %v attempts %d", to, g.Reason, g.Error, g.ExitCode, g.Attempts)
		}
		if to != job.Queued && g.FinishedAt == nil {
			t.Errorf("after a commit to %s: no finished_at", to)
		}
	}
	// The job given back to queued runs again, as its second attempt.
	again := claimOne(t, st, holder(1), jobs[len(jobs)-1].ID)
	if again.Job().Attempts != 2 {
		t.Errorf("claim after a commit to queued: attempts %d, want 2", again.Job().Attempts)
	}
	commit(t, again, job.Succeeded, "done")

	// An illegal target changes nothing; the claim still commits.
	j := submit(t, st, req("exec", 0))[0]
	c := claimOne(t, st, holder(2), j.ID)
	for _, to := range []job.State{job.Deferred, job.InProgress} {
		err := c.Commit(t.Context(), to, "illegal", nil)
		wantErr(t, "Commit to "+string(to), err, job.ErrIllegal)
		if store.Lost(err) {
			t.Errorf("an illegal commit says the claim is lost: %v", err)
		}
		wantStatus(t, st, j.ID, job.InProgress)
	}
	commit(t, c, job.Succeeded, "done")
	wantStatus(t, st, j.ID, job.Succeeded)
}

func testFencing(t *testing.T, st store.Store) {
	ctx := t.Context()
	j := submit(t, st, req("exec", 0))[0]
	old := claimOne(t, st, holder(1), j.ID)

	// A holder within SilentAfter is never touched.
	for _, o := range []store.RecoverOptions{{Actor: recoverer}, {Actor: recoverer, SilentAfter: time.Hour}} {
		outs, err := st.Recover(ctx, o)
		if err != nil {
			t.Fatalf("Recover %+v: %v", o, err)
		}
		for _, out := range outs {
			if out.ID == j.ID && out.Action != job.ActionNone {
				t.Fatalf("Recover %+v took a live claim: %+v", o, out)
			}
		}
		wantStatus(t, st, j.ID, job.InProgress)
	}
	if err := old.Heartbeat(ctx); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}

	// No heartbeat for longer than a tiny SilentAfter: taken away.
	outs, err := st.Recover(ctx, store.RecoverOptions{Actor: recoverer, SilentAfter: time.Nanosecond})
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if !slices.ContainsFunc(outs, func(o job.Outcome) bool { return o.ID == j.ID && o.To == job.Stale }) {
		t.Fatalf("Recover's outcomes %+v do not take %s to stale", outs, j.ID)
	}
	stale := wantStatus(t, st, j.ID, job.Stale)
	if stale.Reason == "" {
		t.Error("a recovered job has no reason")
	}
	stale.UpdatedAt = time.Time{}

	stillStale := func(what string, err error) {
		t.Helper()
		if !store.Lost(err) {
			t.Fatalf("%s of a claim taken away: %v, want an error for which store.Lost is true", what, err)
		}
		g := get(t, st, j.ID)
		g.UpdatedAt = time.Time{}
		if g.Status != stale.Status || g.Attempts != stale.Attempts || g.ClaimToken != stale.ClaimToken || g.Reason != stale.Reason || g.Error != stale.Error {
			t.Fatalf("%s of a claim taken away changed the job: %+v, was %+v", what, g, stale)
		}
	}
	stillStale("Heartbeat", old.Heartbeat(ctx))
	stillStale("Fence", old.Fence(ctx))
	stillStale("Commit", old.Commit(ctx, job.Succeeded, "late", nil))

	// Requeued, claimed again: the new claim works, the old one is still
	// refused.
	if _, err := st.Move(ctx, j.ID, job.Stale, job.Queued, manager, "requeued", nil); err != nil {
		t.Fatal(err)
	}
	fresh := claimOne(t, st, holder(2), j.ID)
	if fresh.Token() == old.Token() || fresh.Job().Attempts != 2 {
		t.Fatalf("second claim: token %q (old %q), attempts %d", fresh.Token(), old.Token(), fresh.Job().Attempts)
	}
	for what, err := range map[string]error{
		"Heartbeat": old.Heartbeat(ctx), "Fence": old.Fence(ctx), "Commit": old.Commit(ctx, job.Failed, "late", nil),
	} {
		if !store.Lost(err) {
			t.Fatalf("%s of the superseded claim: %v, want store.Lost", what, err)
		}
	}
	g := wantStatus(t, st, j.ID, job.InProgress)
	if g.ClaimToken != fresh.Token() {
		t.Fatalf("claim_token %q, want the new claim's %q", g.ClaimToken, fresh.Token())
	}
	if err := fresh.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	commit(t, fresh, job.Succeeded, "done")
	wantStatus(t, st, j.ID, job.Succeeded)
	evs, err := st.History(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Reason == "late" {
			t.Errorf("a superseded claim's commit is in the history: %+v", ev)
		}
	}
}

func testControl(t *testing.T, st store.Store) {
	ctx := t.Context()
	actions := []string{job.ControlHold, job.ControlCancel, job.ControlKill}
	var reqs []job.SubmitRequest
	for i := range actions {
		reqs = append(reqs, req("exec", len(actions)-i)) // claimed in this order
	}
	jobs := submit(t, st, append(reqs, req("exec", -1))...)
	h := holder(1)
	for i, a := range actions {
		c := claimOne(t, st, h, jobs[i].ID)
		if pc, err := c.PendingControl(ctx); err != nil || pc != nil {
			t.Fatalf("PendingControl before any request: %+v, %v", pc, err)
		}
		if err := st.RequestControl(ctx, jobs[i].ID, job.Control{Action: a, Actor: operator, Reason: "note"}); err != nil {
			t.Fatalf("RequestControl %s: %v", a, err)
		}
		pc, err := c.PendingControl(ctx)
		if err != nil || pc == nil || pc.Action != a {
			t.Fatalf("PendingControl after %s: %+v, %v", a, pc, err)
		}
		to, reason, ok := pc.Target()
		if !ok {
			t.Fatalf("request %+v has no target", pc)
		}
		if err := c.Commit(ctx, to, reason, func(j *job.Job) { pc.Refund(j) }); err != nil {
			t.Fatal(err)
		}
		g := wantStatus(t, st, jobs[i].ID, to)
		if !strings.HasSuffix(g.Reason, ": note") {
			t.Errorf("%s: reason %q does not carry the operator's note", a, g.Reason)
		}
	}
	// A job that is not running is moved, not asked.
	wantErr(t, "RequestControl of a queued job", st.RequestControl(ctx, jobs[3].ID, job.Control{Action: job.ControlHold, Actor: operator}), job.ErrState)
	wantErr(t, "RequestControl of an unknown job", st.RequestControl(ctx, "storetest-nothing", job.Control{Action: job.ControlHold, Actor: operator}), job.ErrNotFound)
	wantStatus(t, st, jobs[3].ID, job.Queued)
}

// countTo counts the events of history that enter to.
func countTo(t *testing.T, st store.Store, id string, to job.State) int {
	t.Helper()
	evs, err := st.History(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.To == to {
			n++
		}
	}
	return n
}

func testControlRacesCommit(t *testing.T, st store.Store) {
	ctx := t.Context()
	h := holder(1)

	// Hold of the last attempt, which failed as the request arrived; the
	// manager, out of attempts, would kill it: the hold wins, once, and
	// costs no attempt.
	held := submit(t, st, req("exec", 0))[0]
	c := claimOne(t, st, h, held.ID)
	if err := st.RequestControl(ctx, held.ID, job.Control{Action: job.ControlHold, Actor: operator}); err != nil {
		t.Fatal(err)
	}
	commit(t, c, job.Failed, "exit status 1") // the holder did not see it
	moved, err := st.Move(ctx, held.ID, job.Failed, job.Killed, manager, "out of attempts", nil)
	if err != nil {
		t.Fatalf("manager's move: %v", err)
	}
	if moved.Status == job.Killed {
		t.Fatalf("the hold request was lost: the job was killed (%q)", moved.Reason)
	}
	for range 3 { // whatever claims it next applies the request, not the handler
		if cs := claim(t, st, h, store.ClaimOptions{Max: 10}); len(cs) != 0 {
			t.Fatalf("a job held by request was claimed: %v", claimIDs(cs))
		}
	}
	g := wantStatus(t, st, held.ID, job.Held)
	if g.Attempts != 0 {
		t.Errorf("held job: attempts %d, want 0 (a hold costs no attempt)", g.Attempts)
	}
	if n := countTo(t, st, held.ID, job.Held); n != 1 {
		t.Errorf("held %d times, want once", n)
	}
	if n := countTo(t, st, held.ID, job.Killed); n != 0 {
		t.Errorf("killed %d times, want never", n)
	}

	// Cancel racing a failed commit: the manager's retry is overridden.
	cancelled := submit(t, st, req("exec", 0))[0]
	c = claimOne(t, st, h, cancelled.ID)
	if err := st.RequestControl(ctx, cancelled.ID, job.Control{Action: job.ControlCancel, Actor: operator}); err != nil {
		t.Fatal(err)
	}
	commit(t, c, job.Failed, "exit status 1")
	moved, err = st.Move(ctx, cancelled.ID, job.Failed, job.Queued, manager, "retry", nil)
	if err != nil {
		t.Fatal(err)
	}
	if moved.Status != job.Killed || moved.Reason != job.ReasonCancelled {
		t.Fatalf("cancel racing a commit: %s (%q), want killed (%q)", moved.Status, moved.Reason, job.ReasonCancelled)
	}
	wantStatus(t, st, cancelled.ID, job.Killed)
	if n := countTo(t, st, cancelled.ID, job.Killed); n != 1 {
		t.Errorf("killed %d times, want once", n)
	}
	if cs := claim(t, st, h, store.ClaimOptions{Max: 10}); len(cs) != 0 {
		t.Fatalf("a cancelled job was claimed: %v", claimIDs(cs))
	}

	// A request that loses the race with a successful commit is not
	// applied: the work was done.
	done := submit(t, st, req("exec", 0))[0]
	c = claimOne(t, st, h, done.ID)
	if err := st.RequestControl(ctx, done.ID, job.Control{Action: job.ControlKill, Actor: operator}); err != nil {
		t.Fatal(err)
	}
	commit(t, c, job.Succeeded, "done")
	wantStatus(t, st, done.ID, job.Succeeded)
}

func testMove(t *testing.T, st store.Store) {
	ctx := t.Context()
	d := req("exec", 0)
	d.NotBefore = time.Now().Add(time.Hour)
	jobs := submit(t, st, req("exec", 0), d)
	id := jobs[0].ID

	// Along the map: queued -> held -> queued -> killed.
	for _, step := range [][2]job.State{{job.Queued, job.Held}, {job.Held, job.Queued}, {job.Queued, job.Killed}} {
		reason := fmt.Sprintf("%s to %s", step[0], step[1])
		j, err := st.Move(ctx, id, step[0], step[1], operator, reason, nil)
		if err != nil {
			t.Fatalf("Move %s: %v", reason, err)
		}
		if j.Status != step[1] || j.Reason != reason {
			t.Fatalf("Move %s returned %s (%q)", reason, j.Status, j.Reason)
		}
		if g := wantStatus(t, st, id, step[1]); g.Reason != reason {
			t.Fatalf("after Move %s: reason %q", reason, g.Reason)
		}
	}
	// Out of a terminal state only Retry leads: illegal.
	_, err := st.Move(ctx, id, job.Killed, job.Queued, operator, "x", nil)
	wantErr(t, "Move killed -> queued", err, job.ErrIllegal)

	did := jobs[1].ID
	// A wrong from: ErrState, nothing changed.
	_, err = st.Move(ctx, did, job.Held, job.Queued, operator, "x", nil)
	wantErr(t, "Move from a state the job is not in", err, job.ErrState)
	wantStatus(t, st, did, job.Deferred)
	// Illegal pairs, in-progress included.
	for _, p := range [][2]job.State{{job.Deferred, job.Succeeded}, {job.Deferred, job.InProgress}, {job.Deferred, job.Failed}} {
		_, err = st.Move(ctx, did, p[0], p[1], operator, "x", nil)
		wantErr(t, fmt.Sprintf("Move %s -> %s", p[0], p[1]), err, job.ErrIllegal)
		wantStatus(t, st, did, job.Deferred)
	}
	// mutate edits the new lifecycle; its error aborts the move.
	veto := errors.New("vetoed")
	_, err = st.Move(ctx, did, job.Deferred, job.Queued, manager, "x", func(*job.Job) error { return veto })
	wantErr(t, "Move vetoed by mutate", err, veto)
	wantStatus(t, st, did, job.Deferred)
	j, err := st.Move(ctx, did, job.Deferred, job.Queued, manager, "due", func(j *job.Job) error { j.Error = "kept"; return nil })
	if err != nil || j.Status != job.Queued {
		t.Fatalf("Move deferred -> queued: %v, %v", j, err)
	}
	if g := wantStatus(t, st, did, job.Queued); g.Error != "kept" || g.NotBefore != nil {
		t.Fatalf("after Move with mutate: error %q, not_before %v", g.Error, g.NotBefore)
	}
	_, err = st.Move(ctx, "storetest-nothing", job.Queued, job.Held, operator, "x", nil)
	wantErr(t, "Move of an unknown job", err, job.ErrNotFound)
}

// testTransitionsMap makes every legal move of the map on a job in its
// from state, and tries every other pair: job.ErrIllegal, nothing
// changed. In-progress is left to claims and recovery: Move refuses it
// both ways.
func testTransitionsMap(t *testing.T, st store.Store) {
	ctx := t.Context()
	prio := 0
	// inState returns a new job in state from.
	inState := func(from job.State) string {
		t.Helper()
		prio++ // the newest job is the best: claimOne takes it
		r := req("exec", prio)
		switch from {
		case job.Deferred:
			r.NotBefore = time.Now().Add(time.Hour)
		case job.Held:
			r.Held = true
		}
		id := submit(t, st, r)[0].ID
		switch from {
		case job.Queued, job.Deferred, job.Held:
		case job.InProgress:
			claimOne(t, st, holder(1), id)
		default:
			commit(t, claimOne(t, st, holder(1), id), from, "to "+string(from))
		}
		wantStatus(t, st, id, from)
		return id
	}
	samples := map[job.State]string{}
	for _, from := range job.States {
		samples[from] = inState(from)
	}
	for _, from := range job.States {
		for _, to := range job.States {
			legal := job.CanTransition(from, to) && from != job.InProgress && to != job.InProgress
			what := fmt.Sprintf("Move %s -> %s", from, to)
			if !legal {
				_, err := st.Move(ctx, samples[from], from, to, operator, "x", nil)
				wantErr(t, what, err, job.ErrIllegal)
				wantStatus(t, st, samples[from], from)
				continue
			}
			id := inState(from)
			var mutate func(*job.Job) error
			if to == job.Deferred {
				mutate = func(j *job.Job) error { nb := time.Now().Add(time.Hour); j.NotBefore = &nb; return nil }
			}
			j, err := st.Move(ctx, id, from, to, operator, what, mutate)
			if err != nil || j.Status != to {
				t.Fatalf("%s: %v, %v", what, j, err)
			}
			g := wantStatus(t, st, id, to)
			if g.Reason != what {
				t.Errorf("%s: reason %q", what, g.Reason)
			}
			if to.Terminal() && g.FinishedAt == nil {
				t.Errorf("%s: no finished_at", what)
			}
			if to == job.Deferred && g.NotBefore == nil {
				t.Errorf("%s: no not_before", what)
			}
			if to == job.Queued {
				// Out of the queue again: what claimOne takes next must
				// be the job it was made for.
				if _, err := st.Move(ctx, id, job.Queued, job.Killed, operator, "done with it", nil); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func testRetryRemoveExpire(t *testing.T, st store.Store) {
	ctx := t.Context()
	jobs := submit(t, st, req("exec", 3), req("exec", 2), req("exec", 1)) // claimed in this order
	a, b, q := jobs[0].ID, jobs[1].ID, jobs[2].ID
	h := holder(1)
	c := claimOne(t, st, h, a)
	commit(t, c, job.Killed, "given up")
	r, err := st.Retry(ctx, a, operator, false)
	if err != nil || r.Status != job.Queued || r.Attempts != 0 {
		t.Fatalf("Retry of a killed job: %+v, %v", r, err)
	}
	if g := wantStatus(t, st, a, job.Queued); g.Attempts != 0 || g.Error != "" || g.ClaimToken != "" {
		t.Fatalf("retried job: %+v", g)
	}
	commit(t, claimOne(t, st, h, a), job.Succeeded, "done")
	_, err = st.Retry(ctx, a, operator, false)
	wantErr(t, "Retry of a succeeded job without includeSucceeded", err, job.ErrState)
	wantStatus(t, st, a, job.Succeeded)
	if _, err := st.Retry(ctx, a, operator, true); err != nil {
		t.Fatalf("Retry --succeeded: %v", err)
	}
	wantStatus(t, st, a, job.Queued)
	_, err = st.Retry(ctx, q, operator, true)
	wantErr(t, "Retry of a queued job", err, job.ErrState)

	// Remove: terminal jobs only.
	_, err = st.Remove(ctx, q, operator)
	wantErr(t, "Remove of a queued job", err, job.ErrState)
	wantStatus(t, st, q, job.Queued)
	for _, id := range []string{a, b} {
		commit(t, claimOne(t, st, h, id), job.Succeeded, "done")
	}
	wantStatus(t, st, q, job.Queued)
	rm, err := st.Remove(ctx, b, operator)
	if err != nil || rm.ID != b {
		t.Fatalf("Remove: %v, %v", rm, err)
	}
	if _, err := st.Get(ctx, b); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("Get of a removed job: %v", err)
	}

	// Expire: only when it finished before the cutoff.
	fin := wantStatus(t, st, a, job.Succeeded).Finished()
	_, err = st.Expire(ctx, a, manager, fin)
	wantErr(t, "Expire with a cutoff at its finish", err, job.ErrNotExpired)
	wantStatus(t, st, a, job.Succeeded)
	_, err = st.Expire(ctx, q, manager, time.Now().Add(time.Hour))
	wantErr(t, "Expire of a queued job", err, job.ErrState)
	if _, err := st.Expire(ctx, a, manager, fin.Add(time.Millisecond)); err != nil {
		t.Fatalf("Expire: %v", err)
	}
	if _, err := st.Get(ctx, a); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("Get of an expired job: %v", err)
	}
	if n, err := st.Counts(ctx); err != nil || n[job.Succeeded] != 0 || n[job.Queued] != 1 {
		t.Fatalf("counts: %v, %v", n, err)
	}
}

func list(t *testing.T, st store.Store, f store.Filter) []string {
	t.Helper()
	var ids []string
	if err := st.List(t.Context(), f, func(j *job.Job) error { ids = append(ids, j.ID); return nil }); err != nil {
		t.Fatalf("List %+v: %v", f, err)
	}
	return ids
}

func testListCounts(t *testing.T, st store.Store) {
	ctx := t.Context()
	soon, late := req("kind.b", 0), req("kind.b", 0)
	soon.NotBefore, late.NotBefore = time.Now().Add(time.Hour), time.Now().Add(3*time.Hour)
	hd := req("kind.a", 0)
	hd.Held = true
	jobs := submit(t, st, req("kind.a", 9), req("kind.a", 8), req("kind.b", 7), soon, late, hd, req("kind.a", 0), req("kind.b", 0))
	h := holder(1)
	// Two finish, one runs.
	commit(t, claimOne(t, st, h, jobs[0].ID), job.Succeeded, "done")
	commit(t, claimOne(t, st, h, jobs[1].ID), job.Failed, "exit 1")
	claimOne(t, st, h, jobs[2].ID)

	var all []*job.Job
	for _, j := range jobs {
		all = append(all, get(t, st, j.ID))
	}
	sel := func(keep func(*job.Job) bool) []string {
		var ids []string
		for _, j := range all {
			if keep(j) {
				ids = append(ids, j.ID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	check := func(f store.Filter, want []string) {
		t.Helper()
		if got := list(t, st, f); !slices.Equal(got, want) {
			t.Errorf("List %+v:\n got %v\nwant %v", f, got, want)
		}
	}
	check(store.Filter{}, sel(func(*job.Job) bool { return true }))
	check(store.Filter{States: []job.State{job.Queued, job.Held}}, sel(func(j *job.Job) bool { return j.Status == job.Queued || j.Status == job.Held }))
	check(store.Filter{States: []job.State{job.InProgress}}, []string{jobs[2].ID})
	check(store.Filter{Kinds: []string{"kind.b"}}, sel(func(j *job.Job) bool { return j.Kind == "kind.b" }))
	check(store.Filter{States: []job.State{job.Queued}, Kinds: []string{"kind.a"}}, sel(func(j *job.Job) bool { return j.Kind == "kind.a" && j.Status == job.Queued }))
	done := all[0].Finished()
	check(store.Filter{States: []job.State{job.Succeeded, job.Failed}, FinishedBefore: done.Add(time.Millisecond)}, []string{jobs[0].ID})
	check(store.Filter{States: []job.State{job.Succeeded}, FinishedBefore: done}, nil)
	check(store.Filter{States: []job.State{job.Deferred}, DueBy: time.Now().Add(2 * time.Hour)}, []string{jobs[3].ID})
	check(store.Filter{States: []job.State{job.Deferred}, DueBy: time.Now()}, nil)

	// Pages of 3 with a cursor make the whole listing, once each.
	var paged []string
	after := ""
	for range len(jobs) + 1 {
		page := list(t, st, store.Filter{AfterID: after, Limit: 3})
		if len(page) > 3 {
			t.Fatalf("page of %d with Limit 3", len(page))
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = page[len(page)-1]
	}
	check(store.Filter{}, paged)
	if len(paged) != len(jobs) {
		t.Errorf("paging listed %d jobs, want %d", len(paged), len(jobs))
	}

	// fn's error stops the listing and comes back as is.
	stop := errors.New("stop")
	calls := 0
	err := st.List(ctx, store.Filter{}, func(*job.Job) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("List whose fn fails: %v after %d calls", err, calls)
	}

	n, err := st.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[job.State]int{}
	for _, j := range all {
		want[j.Status]++
	}
	for _, s := range job.States {
		if n[s] != want[s] {
			t.Errorf("Counts: %s %d, want %d (all: %v)", s, n[s], want[s], n)
		}
	}
}

// testListByFinished: a listing ByFinished is in the order the jobs
// finished (then ID), here the reverse of their IDs' order; States,
// Kinds, FinishedBefore and Limit select as in ID order; AfterID is
// refused with it.
func testListByFinished(t *testing.T, st store.Store) {
	ctx := t.Context()
	var reqs []job.SubmitRequest
	for i, id := range []string{"fin-a", "fin-b", "fin-c", "fin-d", "fin-e", "fin-f"} {
		kind := "kind.a"
		if id == "fin-b" {
			kind = "kind.b"
		}
		r := req(kind, i+1) // claimed, and finished, last ID first
		r.ID = id
		reqs = append(reqs, r)
	}
	reqs[5].Priority = 0 // fin-f: killed while queued, last
	jobs := submit(t, st, reqs...)
	h := holder(1)
	for _, step := range []struct {
		id string
		to job.State
	}{{"fin-e", job.Succeeded}, {"fin-d", job.Failed}, {"fin-c", job.Succeeded}, {"fin-b", job.Succeeded}, {"fin-a", job.Succeeded}} {
		commit(t, claimOne(t, st, h, step.id), step.to, "done")
		time.Sleep(2 * time.Millisecond) // finishing times apart on any clock
	}
	if _, err := st.Move(ctx, "fin-f", job.Queued, job.Killed, operator, "", nil); err != nil {
		t.Fatal(err)
	}

	var all []*job.Job
	for _, j := range jobs {
		all = append(all, get(t, st, j.ID))
	}
	slices.SortFunc(all, func(a, b *job.Job) int {
		if c := a.Finished().Compare(b.Finished()); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	sel := func(keep func(*job.Job) bool) []string {
		var ids []string
		for _, j := range all {
			if keep(j) {
				ids = append(ids, j.ID)
			}
		}
		return ids
	}
	if got := sel(func(*job.Job) bool { return true }); !slices.Equal(got, []string{"fin-e", "fin-d", "fin-c", "fin-b", "fin-a", "fin-f"}) {
		t.Fatalf("finishing order %v: the jobs did not finish in the order the test made", got)
	}
	check := func(f store.Filter, want []string) {
		t.Helper()
		if got := list(t, st, f); !slices.Equal(got, want) {
			t.Errorf("List %+v:\n got %v\nwant %v", f, got, want)
		}
	}
	succeeded := []job.State{job.Succeeded}
	later := time.Now().Add(time.Hour)
	check(store.Filter{States: succeeded, ByFinished: true}, []string{"fin-e", "fin-c", "fin-b", "fin-a"})
	check(store.Filter{States: succeeded, FinishedBefore: later, ByFinished: true}, []string{"fin-e", "fin-c", "fin-b", "fin-a"})
	check(store.Filter{States: succeeded, FinishedBefore: later, ByFinished: true, Limit: 2}, []string{"fin-e", "fin-c"})
	check(store.Filter{States: succeeded, FinishedBefore: get(t, st, "fin-b").Finished(), ByFinished: true}, []string{"fin-e", "fin-c"})
	check(store.Filter{States: succeeded, Kinds: []string{"kind.a"}, FinishedBefore: later, ByFinished: true}, []string{"fin-e", "fin-c", "fin-a"})
	check(store.Filter{States: []job.State{job.Killed}, FinishedBefore: later, ByFinished: true}, []string{"fin-f"})
	check(store.Filter{States: []job.State{job.Succeeded, job.Failed, job.Killed}, ByFinished: true},
		sel(func(j *job.Job) bool { return j.Status.Terminal() || j.Status == job.Failed }))
	check(store.Filter{States: []job.State{job.Succeeded, job.Killed}, FinishedBefore: get(t, st, "fin-a").Finished(), ByFinished: true, Limit: 3},
		[]string{"fin-e", "fin-c", "fin-b"})
	check(store.Filter{States: []job.State{job.Queued}, ByFinished: true}, nil)

	err := st.List(ctx, store.Filter{States: succeeded, ByFinished: true, AfterID: "fin-a"}, func(*job.Job) error { return nil })
	if err == nil {
		t.Error("List ByFinished with AfterID: no error")
	}
}

func testHistory(t *testing.T, st store.Store) {
	ctx := t.Context()
	j := submit(t, st, req("exec", 0))[0]
	h1, h2 := holder(1), holder(2)
	c := claimOne(t, st, h1, j.ID)
	commit(t, c, job.Failed, "exit status 2")
	if _, err := st.Move(ctx, j.ID, job.Failed, job.Queued, manager, "retry 1", nil); err != nil {
		t.Fatal(err)
	}
	c = claimOne(t, st, h2, j.ID)
	commit(t, c, job.Succeeded, "done")

	evs, err := st.History(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		from, to job.State
		actor    string
		attempt  int
		reason   string
	}
	want := []step{
		{"", job.Queued, submitter, 0, "submitted"},
		{job.Queued, job.InProgress, h1.Actor, 1, ""},
		{job.InProgress, job.Failed, h1.Actor, 1, "exit status 2"},
		{job.Failed, job.Queued, manager, 1, "retry 1"},
		{job.Queued, job.InProgress, h2.Actor, 2, ""},
		{job.InProgress, job.Succeeded, h2.Actor, 2, "done"},
	}
	if len(evs) != len(want) {
		t.Fatalf("History: %d events, want %d: %+v", len(evs), len(want), evs)
	}
	for i, ev := range evs {
		w := want[i]
		if ev.From != w.from || ev.To != w.to || ev.Actor != w.actor || ev.Attempt != w.attempt || ev.Reason != w.reason {
			t.Errorf("event %d: %s -> %s by %s attempt %d %q; want %s -> %s by %s attempt %d %q",
				i, ev.From, ev.To, ev.Actor, ev.Attempt, ev.Reason, w.from, w.to, w.actor, w.attempt, w.reason)
		}
		if i > 0 && ev.Time.Before(evs[i-1].Time) {
			t.Errorf("event %d goes back in time", i)
		}
	}
	if _, err := st.History(ctx, "storetest-nothing"); !errors.Is(err, job.ErrNotFound) {
		t.Errorf("History of an unknown job: %v", err)
	}
}
