package pgstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// importRec is a job as a spool keeps it, in state st, with its history.
func importRec(id string, st job.State) store.ImportRecord {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
	t1 := t0.Add(time.Minute)
	exit := 3
	j := &job.Job{SchemaVersion: job.SchemaVersion, ID: id, Kind: "noop", Status: st, Priority: 2, Attempts: 2,
		MaxAttempts: 5, CreatedAt: t0, UpdatedAt: t1, Agent: "a1", CorrelationID: "c2", ClaimToken: "tok",
		StartedAt: &t0, LastHeartbeat: &t1, FinishedAt: &t1, ExitCode: &exit, Reason: "why", Error: "boom", OutputDropped: 7}
	return store.ImportRecord{Job: j, Prompt: []byte("{\"b\": 1,\n \"a\": 2}"), History: []job.Event{
		{Time: t0, Actor: "farroctl", To: job.Queued, Reason: "submitted"},
		{Time: t1, Actor: "agentd/a1", From: job.Queued, To: job.InProgress, Attempt: 1, CorrelationID: "c1"},
	}}
}

// Import inserts a job as it is, in any state but in-progress, with its
// history and its prompt byte for byte; again, it is the same; with other
// content, a conflict that changes nothing.
func TestImport(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := ctxT(t)
	for _, st := range job.States {
		if st == job.InProgress {
			continue
		}
		rec := importRec("imp-"+string(st), st)
		res, err := s.Import(ctx, rec)
		if err != nil || res != store.Imported {
			t.Fatalf("import %s: %v %v", st, res, err)
		}
		got, err := s.Get(ctx, rec.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := rec.Job.Clone()
		normJob(want)
		if g, w := string(got.Marshal()), string(want.Marshal()); g != w {
			t.Errorf("%s: stored\n%s\nwant\n%s", st, g, w)
		}
		if p, _ := s.Prompt(ctx, rec.Job.ID); string(p) != string(rec.Prompt) {
			t.Errorf("%s: prompt %q", st, p)
		}
		h, err := s.History(ctx, rec.Job.ID)
		if err != nil || len(h) != 2 || h[1].To != job.InProgress || !h[1].Time.Equal(micro(rec.History[1].Time)) {
			t.Errorf("%s: history %+v %v", st, h, err)
		}
		if res, err := s.Import(ctx, rec); err != nil || res != store.ImportSame {
			t.Errorf("%s again: %v %v", st, res, err)
		}
	}
	// A queued import is claimable like any queued job.
	c := claimOne(t, s, "a9", time.Minute)
	if c.Job().ID != "imp-queued" || c.Job().Attempts != 3 {
		t.Errorf("claimed %s attempt %d", c.Job().ID, c.Job().Attempts)
	}

	other := importRec("imp-held", job.Held)
	other.Job.Attempts = 4
	if _, err := s.Import(ctx, other); !errors.Is(err, job.ErrDuplicate) || !strings.Contains(err.Error(), "attempts") {
		t.Errorf("conflict: %v", err)
	}
	other = importRec("imp-held", job.Held)
	other.History = other.History[:1]
	if _, err := s.Import(ctx, other); !errors.Is(err, job.ErrDuplicate) || !strings.Contains(err.Error(), "history") {
		t.Errorf("conflict of history: %v", err)
	}
	if j, _ := s.Get(ctx, "imp-held"); j.Attempts != 2 {
		t.Errorf("a conflict changed the job: %+v", j)
	}

	for _, bad := range []job.State{job.InProgress, "running", ""} {
		rec := importRec("imp-bad", bad)
		if _, err := s.Import(ctx, rec); !errors.Is(err, store.ErrImportRefused) {
			t.Errorf("state %q: %v", bad, err)
		}
	}
	rec := importRec("imp-bad", job.Queued)
	rec.Prompt = []byte("{")
	if _, err := s.Import(ctx, rec); !errors.Is(err, store.ErrImportRefused) || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("bad prompt: %v", err)
	}
	if _, err := s.Get(ctx, "imp-bad"); !errors.Is(err, job.ErrNotFound) {
		t.Errorf("a refused import left a job: %v", err)
	}
}
