package job_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

func TestSubmitIncoming(t *testing.T) {
	t.Parallel()
	s := setup(t)
	j, err := s.Submit(job.SubmitRequest{ID: "j1", Kind: "exec", Priority: 5, MaxAttempts: 4, Prompt: []byte(testPrompt), Actor: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != job.Queued || j.ID != "j1" || j.Attempts != 0 {
		t.Fatalf("returned %+v", j)
	}
	dir := s.JobDir(job.Queued, "", "j1")
	got := readJob(t, dir)
	if got.Status != job.Queued || got.Kind != "exec" || got.Priority != 5 || got.MaxAttempts != 4 ||
		got.SchemaVersion != "1.0.0" || got.CreatedAt.IsZero() || got.NotBefore != nil {
		t.Fatalf("job.json = %+v", got)
	}
	if p := readRaw(t, filepath.Join(dir, job.PromptFile)); string(p) != testPrompt {
		t.Fatalf("prompt.json = %q", p)
	}
	evs := events(t, dir)
	if len(evs) != 1 || evs[0].To != job.Queued || evs[0].Actor != "tester" || evs[0].From != "" {
		t.Fatalf("events = %+v", evs)
	}
	dirEmpty(t, s.Path(job.TmpDir))
	mustNotExist(t, s.LockPath("j1"))
}

func TestSubmitDeferredAndHeld(t *testing.T) {
	t.Parallel()
	s := setup(t)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	j, err := s.Submit(job.SubmitRequest{ID: "later", Kind: "noop", NotBefore: at, Prompt: []byte(testPrompt)})
	if err != nil {
		t.Fatal(err)
	}
	got := readJob(t, s.JobDir(job.Deferred, "", "later"))
	if j.Status != job.Deferred || got.Status != job.Deferred || got.NotBefore == nil || !got.NotBefore.Equal(at) {
		t.Fatalf("deferred job.json = %+v", got)
	}
	mustNotExist(t, s.JobDir(job.Queued, "", "later"))

	// A time in the past is due now.
	if _, err := s.Submit(job.SubmitRequest{ID: "past", Kind: "noop", NotBefore: time.Now().Add(-time.Minute), Prompt: []byte(testPrompt)}); err != nil {
		t.Fatal(err)
	}
	if got := readJob(t, s.JobDir(job.Queued, "", "past")); got.Status != job.Queued {
		t.Fatalf("past not_before: status %s", got.Status)
	}

	if _, err := s.Submit(job.SubmitRequest{ID: "paused", Kind: "noop", Held: true, Prompt: []byte(testPrompt)}); err != nil {
		t.Fatal(err)
	}
	if got := readJob(t, s.JobDir(job.Held, "", "paused")); got.Status != job.Held {
		t.Fatalf("held: status %s", got.Status)
	}
	dirEmpty(t, s.Path(job.TmpDir))
}

func TestSubmitGeneratedIDSortsByTime(t *testing.T) {
	t.Parallel()
	s := setup(t)
	start := time.Now().UTC()
	var ids []string
	for i := 0; i < 5; i++ {
		j, err := s.Submit(job.SubmitRequest{Kind: "noop", Prompt: []byte(testPrompt)})
		if err != nil {
			t.Fatal(err)
		}
		if err := job.ValidateID(j.ID); err != nil {
			t.Fatal(err)
		}
		mustExist(t, s.JobDir(job.Queued, "", j.ID))
		ids = append(ids, j.ID)
	}
	end := time.Now().UTC()
	// Each submit fsyncs, so successive IDs carry increasing timestamps.
	if !sort.StringsAreSorted(ids) {
		t.Fatalf("generated IDs do not sort by creation: %q", ids)
	}
	for _, id := range ids {
		ts, _, _ := strings.Cut(id, "-")
		at, err := time.Parse("20060102T150405.000000Z", ts)
		if err != nil {
			t.Fatalf("id %q: no timestamp prefix: %v", id, err)
		}
		if at.Before(start.Truncate(time.Microsecond)) || at.After(end) {
			t.Fatalf("id %q time %v outside [%v, %v]", id, at, start, end)
		}
	}
}

func TestNewIDOrder(t *testing.T) {
	t.Parallel()
	prev := job.NewID()
	seen := map[string]bool{prev: true}
	for i := 0; i < 2000; i++ {
		id := job.NewID()
		if seen[id] {
			t.Fatalf("duplicate generated id %q", id)
		}
		seen[id] = true
		pt, _, _ := strings.Cut(prev, "-")
		it, _, _ := strings.Cut(id, "-")
		if it < pt {
			t.Fatalf("id %q sorts before the earlier %q", id, prev)
		}
		prev = id
	}
}

func TestSubmitDuplicateInAnyState(t *testing.T) {
	t.Parallel()
	for _, st := range allStates {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			place(t, s, st, "w1", "dup", st, nil)
			before := tree(t, s.Root)
			_, err := s.Submit(job.SubmitRequest{ID: "dup", Kind: "noop", Prompt: []byte(`{"other":true}`)})
			if !errors.Is(err, job.ErrDuplicate) {
				t.Fatalf("Submit of an id in %s = %v, want ErrDuplicate", st, err)
			}
			sameTree(t, before, tree(t, s.Root))
		})
	}
}

func TestSubmitWhileLocked(t *testing.T) {
	t.Parallel()
	s := setup(t)
	if err := fsq.TryLock(s.LockPath("j1"), []byte(`{"pid":1}`)); err != nil {
		t.Fatal(err)
	}
	before := tree(t, s.Root)
	_, err := s.Submit(job.SubmitRequest{ID: "j1", Kind: "noop", Prompt: []byte(testPrompt)})
	if !errors.Is(err, job.ErrDuplicate) {
		t.Fatalf("Submit while the lock is held = %v, want ErrDuplicate", err)
	}
	sameTree(t, before, tree(t, s.Root)) // lock untouched, tmp/ empty
}

func TestSubmitRefusesBadInput(t *testing.T) {
	t.Parallel()
	exact := append(append([]byte(`"`), bytes.Repeat([]byte("a"), job.MaxPromptSize-2)...), '"')
	over := append(append([]byte(`"`), bytes.Repeat([]byte("a"), job.MaxPromptSize-1)...), '"')
	long := strings.Repeat("a", 129)
	cases := map[string]job.SubmitRequest{
		"id with slash":      {ID: "a/b"},
		"id dot dot":         {ID: ".."},
		"id parent path":     {ID: "../x"},
		"id lock suffix":     {ID: "j1.lock"},
		"id too long":        {ID: long},
		"id leading dot":     {ID: ".hidden"},
		"id leading dash":    {ID: "-x"},
		"id with space":      {ID: "a b"},
		"id with NUL":        {ID: "a\x00b"},
		"id with newline":    {ID: "a\n"},
		"invalid JSON":       {Prompt: []byte(`{"a":`)},
		"empty prompt":       {Prompt: []byte{}},
		"two JSON documents": {Prompt: []byte(`{} {}`)},
		"prompt over 1 MiB":  {Prompt: over},
		"bad kind":           {Kind: "Exec; rm"},
		"no kind":            {Kind: "-"},
		"negative attempts":  {MaxAttempts: -1},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			if req.ID == "" {
				req.ID = "ok1"
			}
			if req.Kind == "" {
				req.Kind = "noop"
			} else if req.Kind == "-" {
				req.Kind = ""
			}
			if req.Prompt == nil {
				req.Prompt = []byte(testPrompt)
			}
			before := tree(t, s.Root)
			if j, err := s.Submit(req); err == nil {
				t.Fatalf("Submit accepted it: %+v", j)
			}
			sameTree(t, before, tree(t, s.Root))
		})
	}
	t.Run("limits are inclusive", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		id := strings.Repeat("a", 128)
		if _, err := s.Submit(job.SubmitRequest{ID: id, Kind: "noop", Prompt: exact}); err != nil {
			t.Fatalf("128-char id with a prompt of exactly 1 MiB: %v", err)
		}
		if p := readRaw(t, filepath.Join(s.JobDir(job.Queued, "", id), job.PromptFile)); len(p) != job.MaxPromptSize {
			t.Fatalf("prompt is %d bytes", len(p))
		}
	})
}

func TestSubmitConcurrentSameID(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const n = 8
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = s.Submit(job.SubmitRequest{ID: "race", Kind: "noop", Prompt: []byte(testPrompt)})
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, job.ErrDuplicate):
			t.Errorf("loser error = %v, want ErrDuplicate", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d submits won, want exactly 1", wins)
	}
	locs, err := s.Locate("race")
	if err != nil || len(locs) != 1 || locs[0].State != job.Queued {
		t.Fatalf("Locate = %+v, %v; want one job in incoming", locs, err)
	}
	dirEmpty(t, s.Path(job.TmpDir))
	mustNotExist(t, s.LockPath("race"))
}

// SubmitMany: each request stands alone (an invalid one, or a second use
// of an ID within the batch, is refused without stopping the others), the
// jobs share two barriers, and tmp/ is left empty.
func TestSubmitManyMixed(t *testing.T) {
	t.Parallel()
	s := setup(t)
	before := s.Syncs()
	reqs := []job.SubmitRequest{
		{ID: "m1", Kind: "exec", Prompt: []byte(testPrompt)},
		{ID: "m2", Kind: "BAD KIND", Prompt: []byte(testPrompt)},
		{ID: "m1", Kind: "exec", Prompt: []byte(testPrompt)},
		{ID: "m3", Kind: "exec", Prompt: []byte(testPrompt), Held: true},
		{ID: "../m4", Kind: "exec", Prompt: []byte(testPrompt)},
	}
	jobs, errs := s.SubmitMany(reqs)
	want := []bool{true, false, false, true, false}
	for i, ok := range want {
		if (errs[i] == nil) != ok || (jobs[i] != nil) != ok {
			t.Errorf("request %d: job %v, err %v; want ok=%v", i, jobs[i], errs[i], ok)
		}
	}
	if !errors.Is(errs[2], job.ErrDuplicate) {
		t.Errorf("second m1: %v, want ErrDuplicate", errs[2])
	}
	if got := readJob(t, s.JobDir(job.Queued, "", "m1")); got.Status != job.Queued {
		t.Errorf("m1 is %s", got.Status)
	}
	if got := readJob(t, s.JobDir(job.Held, "", "m3")); got.Status != job.Held {
		t.Errorf("m3 is %s", got.Status)
	}
	if n := s.Syncs() - before; n != 2 {
		t.Errorf("a batch made %d syncs, want 2", n)
	}
	dirEmpty(t, s.Path(job.TmpDir))
}
