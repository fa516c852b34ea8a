package manager

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

func pgStore(t *testing.T, ctx context.Context) *pgstore.Store {
	t.Helper()
	url := testpg.NewDatabase(t, testpg.Start(t))
	if _, err := pgstore.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	st, err := pgstore.Open(ctx, url, pgstore.WithScratch(filepath.Join(t.TempDir(), "scratch")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// claimAll submits reqs and claims them all.
func claimAll(t *testing.T, ctx context.Context, st store.Store, reqs ...job.SubmitRequest) []store.Claim {
	t.Helper()
	_, errs := st.Submit(ctx, reqs)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	cs, err := st.Claim(ctx, job.Holder{Actor: "agentd/w1", Agent: "w1"}, store.ClaimOptions{Max: len(reqs), Lease: time.Minute})
	if err != nil || len(cs) != len(reqs) {
		t.Fatalf("claim: %d %v", len(cs), err)
	}
	return cs
}

func state(t *testing.T, ctx context.Context, st store.Store, id string) *job.Job {
	t.Helper()
	j, err := st.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// On a store the policy is the spool's: a stale job is requeued (killed
// once out of attempts), a failed one deferred with a backoff (killed once
// out of attempts), a due deferred job promoted, and retention removes
// terminal jobs finished before its cutoff. Each pass lists one page of
// each state at most.
func TestSharedPolicy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := pgStore(t, ctx)
	cs := claimAll(t, ctx, st,
		job.SubmitRequest{ID: "stale-a", Kind: "exec", Prompt: []byte(`{}`)},
		job.SubmitRequest{ID: "stale-b", Kind: "exec", Prompt: []byte(`{}`)},
		job.SubmitRequest{ID: "stale-c", Kind: "exec", Prompt: []byte(`{}`)},
		job.SubmitRequest{ID: "stale-last", Kind: "exec", Prompt: []byte(`{}`), MaxAttempts: 1},
		job.SubmitRequest{ID: "failed-a", Kind: "exec", Prompt: []byte(`{}`)},
		job.SubmitRequest{ID: "failed-last", Kind: "exec", Prompt: []byte(`{}`), MaxAttempts: 1},
		job.SubmitRequest{ID: "done-a", Kind: "exec", Prompt: []byte(`{}`)},
	)
	for _, c := range cs {
		if c.Job().ID == "done-a" {
			if err := c.Commit(ctx, job.Succeeded, "", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	// done-a is past its retention (2s), the others not: those killed in
	// the pass finish then, and the pass (a few statements) must stay
	// well within the retention on a loaded machine (at 300ms it did not
	// always: failed-last was removed by the same pass).
	time.Sleep(2100 * time.Millisecond)
	for _, c := range cs {
		if strings.HasPrefix(c.Job().ID, "failed") {
			if err := c.Commit(ctx, job.Failed, "exit status 1", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(5 * time.Millisecond)
	if outs, err := st.Recover(ctx, store.RecoverOptions{Actor: "test", SilentAfter: time.Millisecond}); err != nil || len(outs) != 4 {
		t.Fatalf("recover: %v %v", outs, err)
	}
	buf := logxtest.New(t)
	m := NewShared(st, Config{BackoffBase: 50 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Retention: 2 * time.Second,
		Rand: func(n int64) int64 { return n - 1 }}, logx.New(buf, Actor, "debug"))
	m.limit = 2

	m.Pass(ctx) // the first page of each state: stale-a, stale-b; both failed; done-a expired
	if j := state(t, ctx, st, "stale-a"); j.Status != job.Queued || !strings.Contains(j.Reason, "requeued after crash") || j.Error == "" {
		t.Errorf("stale-a: %s %q error %q, want queued after crash, with the recovery's cause", j.Status, j.Reason, j.Error)
	}
	if j := state(t, ctx, st, "stale-c"); j.Status != job.Stale {
		t.Errorf("stale-c: %s, want stale still (beyond the first page)", j.Status)
	}
	fa := state(t, ctx, st, "failed-a")
	if fa.Status != job.Deferred || fa.NotBefore == nil || !strings.Contains(fa.Reason, "retry 1/2 in 50ms") {
		t.Errorf("failed-a: %s %q not_before %v, want deferred for 50ms", fa.Status, fa.Reason, fa.NotBefore)
	}
	if j := state(t, ctx, st, "failed-last"); j.Status != job.Killed || !strings.Contains(j.Reason, "out of attempts") {
		t.Errorf("failed-last: %s %q, want killed out of attempts", j.Status, j.Reason)
	}
	if _, err := st.Get(ctx, "done-a"); err == nil {
		t.Error("done-a: kept past its retention")
	}

	m.Pass(ctx) // the next page: stale-c, stale-last
	if j := state(t, ctx, st, "stale-c"); j.Status != job.Queued {
		t.Errorf("stale-c: %s, want queued at the second pass", j.Status)
	}
	if j := state(t, ctx, st, "stale-last"); j.Status != job.Killed {
		t.Errorf("stale-last: %s, want killed (out of attempts)", j.Status)
	}
	time.Sleep(time.Until(*fa.NotBefore) + 10*time.Millisecond)
	m.Pass(ctx)
	if j := state(t, ctx, st, "failed-a"); j.Status != job.Queued || j.Reason != "not_before reached" {
		t.Errorf("failed-a once due: %s %q, want queued", j.Status, j.Reason)
	}
	if !strings.Contains(buf.String(), "retention removed terminal jobs") {
		t.Errorf("no retention line:\n%s", buf.String())
	}
}

// Retention on a store removes the jobs that finished first, a page a
// pass, whatever their IDs say (here they say the other order), and the
// next pass starts at the first finished again.
func TestSharedRetentionFirstFinishedFirst(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := pgStore(t, ctx)
	cs := claimAll(t, ctx, st,
		job.SubmitRequest{ID: "ret-a", Kind: "exec", Prompt: []byte(`{}`)},
		job.SubmitRequest{ID: "ret-b", Kind: "exec", Prompt: []byte(`{}`)},
		job.SubmitRequest{ID: "ret-c", Kind: "exec", Prompt: []byte(`{}`)},
	)
	byID := map[string]store.Claim{}
	for _, c := range cs {
		byID[c.Job().ID] = c
	}
	for _, id := range []string{"ret-c", "ret-b", "ret-a"} {
		if err := byID[id].Commit(ctx, job.Succeeded, "", nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(400 * time.Millisecond) // all three past their retention (300ms)
	m := NewShared(st, Config{Retention: 300 * time.Millisecond}, logx.New(logxtest.New(t), Actor, "debug"))
	m.limit = 2
	m.Pass(ctx)
	for id, kept := range map[string]bool{"ret-a": true, "ret-b": false, "ret-c": false} {
		if _, err := st.Get(ctx, id); (err == nil) != kept {
			t.Errorf("%s after the first pass: %v; want kept %v (the first two finished go first)", id, err, kept)
		}
	}
	m.retain = time.Time{} // the next retention pass now
	m.Pass(ctx)
	if _, err := st.Get(ctx, "ret-a"); err == nil {
		t.Error("ret-a: kept after the second pass")
	}
}
