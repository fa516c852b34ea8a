package pipeline_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// countingJobs is a job store that counts what the pipeline asks of it.
type countingJobs struct {
	store.Store
	mu        sync.Mutex
	submitted []string
	got       []string
}

func (c *countingJobs) Submit(ctx context.Context, reqs []job.SubmitRequest) ([]*job.Job, []error) {
	c.mu.Lock()
	for _, r := range reqs {
		c.submitted = append(c.submitted, r.ID)
	}
	c.mu.Unlock()
	return c.Store.Submit(ctx, reqs)
}

func (c *countingJobs) Get(ctx context.Context, id string) (*job.Job, error) {
	c.mu.Lock()
	c.got = append(c.got, id)
	c.mu.Unlock()
	return c.Store.Get(ctx, id)
}

// TestChecksThroughStore: a run submits its check jobs to the job store it
// is given, and a repeated run finds them there (already queued); without
// a job store only a dry run is possible.
func TestChecksThroughStore(t *testing.T) {
	t.Parallel()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, name := range []string{"one", "two"} {
		src := source.New(name, "http://"+name+".test/")
		if err := source.Create(s, src, now); err != nil {
			t.Fatal(err)
		}
	}
	jobs := &countingJobs{Store: spoolstore.New(s)}
	o := pipeline.RunOptions{Mode: pipeline.ModeCheck, Now: now, Jobs: jobs}
	rep, err := pipeline.Run(s, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Checks) != 2 || len(jobs.submitted) != 2 {
		t.Fatalf("%d checks, %d submitted through the store: %+v", len(rep.Checks), len(jobs.submitted), rep.Checks)
	}
	for i, c := range rep.Checks {
		if c.Status != "submitted" || c.JobID != jobs.submitted[i] {
			t.Errorf("check %d: %s %s, the store got %s", i, c.JobID, c.Status, jobs.submitted[i])
		}
		j, err := jobs.Store.Get(t.Context(), c.JobID)
		if err != nil || j.Kind != pipeline.KindCheck || (j.Status != job.Queued && j.Status != job.Deferred) {
			t.Errorf("check job %s: %+v, %v; want a queued (or deferred) %s", c.JobID, j, err, pipeline.KindCheck)
		}
	}
	rep, err = pipeline.Run(s, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		if c.Status != "already_queued" {
			t.Errorf("run 2, check %s: %s, want already_queued", c.JobID, c.Status)
		}
	}
	if len(jobs.got) != 2 {
		t.Errorf("run 2 looked %d jobs up in the store, want 2: %v", len(jobs.got), jobs.got)
	}
	if _, err := pipeline.Run(s, pipeline.RunOptions{Mode: pipeline.ModeCheck, Now: now}); err == nil {
		t.Error("a run with no job store did not fail")
	}
	if _, err := pipeline.Run(s, pipeline.RunOptions{Mode: pipeline.ModeCheck, Now: now, DryRun: true}); err != nil {
		t.Errorf("a dry run with no job store: %v", err)
	}
}
