package pgstore

import (
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// A paused kind is not claimed (by the one claim statement, and by the
// claim of several statements a job carrying a request takes); others
// are; resume makes it claimable again.
func TestPausedKindIsNotClaimed(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := ctxT(t)
	submit(t, s, job.SubmitRequest{ID: "e1", Kind: "exec", Priority: 9}, job.SubmitRequest{ID: "n1", Kind: "noop"})
	prev, err := s.PauseKind(ctx, PausedKind{Kind: "exec", By: "farroctl", Reason: "deploy"})
	if err != nil || prev != nil {
		t.Fatalf("pause: %v, %v", prev, err)
	}
	prev, err = s.PauseKind(ctx, PausedKind{Kind: "exec", By: "farroctl", Reason: "longer"})
	if err != nil || prev == nil {
		t.Fatalf("pause again: %v, %v; want the first pause's time", prev, err)
	}
	ps, err := s.PausedKinds(ctx)
	if err != nil || len(ps) != 1 || ps[0].Reason != "longer" || !ps[0].PausedAt.Equal(*prev) {
		t.Fatalf("paused kinds: %+v, %v", ps, err)
	}
	h := job.Holder{Actor: "agentd/w", Agent: "w"}
	cs, err := s.Claim(ctx, h, store.ClaimOptions{Max: 5, Lease: time.Minute})
	if err != nil || len(cs) != 1 || cs[0].Job().ID != "n1" {
		t.Fatalf("claim with exec paused: %v, %v; want n1 only", cs, err)
	}
	// A queued job carrying an operator's request goes through the
	// claim of several statements: it too skips the paused kind.
	if _, err := s.pool.Exec(ctx, `UPDATE jobs SET control = '{"action":"hold","attempt":1}' WHERE id = 'e1'`); err != nil {
		t.Fatal(err)
	}
	if cs, _, err := s.claimSlow(ctx, h, nil, 5, time.Minute); err != nil || len(cs) != 0 {
		t.Fatalf("slow claim with exec paused: %v, %v", cs, err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE jobs SET control = NULL WHERE id = 'e1'`); err != nil {
		t.Fatal(err)
	}
	if was, err := s.ResumeKind(ctx, "exec"); err != nil || !was {
		t.Fatalf("resume: %v, %v", was, err)
	}
	if was, err := s.ResumeKind(ctx, "exec"); err != nil || was {
		t.Fatalf("resume again: %v, %v", was, err)
	}
	cs, err = s.Claim(ctx, h, store.ClaimOptions{Max: 5, Lease: time.Minute})
	if err != nil || len(cs) != 1 || cs[0].Job().ID != "e1" {
		t.Fatalf("claim after resume: %v, %v; want e1", cs, err)
	}
}
