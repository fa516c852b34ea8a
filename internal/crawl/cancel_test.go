package crawl

import (
	"errors"
	"strings"
	"testing"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// TestCancelJobThroughStore: a queued job is moved to killed
// ("cancelled"), a running one gets a cancel request its holder sees, a
// finished one is left alone, a missing one is job.ErrNotFound; all
// through the job store.
func TestCancelJobThroughStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := spoolstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{FetchJobID("c", "http://a.test/1"), FetchJobID("c", "http://a.test/2")}
	for _, id := range ids {
		if _, errs := st.Submit(ctx, []job.SubmitRequest{{ID: id, Kind: KindFetch, Prompt: []byte(`{}`), Actor: "test"}}); errs[0] != nil {
			t.Fatal(errs[0])
		}
	}
	cls, err := st.Claim(ctx, job.Holder{Actor: "test/w1", Agent: "w1"}, store.ClaimOptions{Max: 1})
	if err != nil || len(cls) != 1 {
		t.Fatalf("claim: %d, %v", len(cls), err)
	}
	running := cls[0].Job().ID
	queued := ids[0]
	if queued == running {
		queued = ids[1]
	}

	if out, err := CancelJob(ctx, st, queued, "test/frontier"); err != nil || out != CancelDone {
		t.Fatalf("queued job: %v, %v; want CancelDone", out, err)
	}
	j, err := st.Get(ctx, queued)
	if err != nil || j.Status != job.Killed || !strings.HasPrefix(j.Reason, job.ReasonCancelled) {
		t.Fatalf("queued job after cancel: %+v, %v; want killed (cancelled)", j, err)
	}
	if out, err := CancelJob(ctx, st, queued, "test/frontier"); err != nil || out != CancelTerminal {
		t.Errorf("killed job: %v, %v; want CancelTerminal", out, err)
	}

	if out, err := CancelJob(ctx, st, running, "test/frontier"); err != nil || out != CancelRequested {
		t.Fatalf("running job: %v, %v; want CancelRequested", out, err)
	}
	c, err := cls[0].PendingControl(ctx)
	if err != nil || c == nil || c.Action != job.ControlCancel || c.Actor != "test/frontier" {
		t.Errorf("the holder sees %+v, %v; want a cancel by test/frontier", c, err)
	}

	if _, err := CancelJob(ctx, st, FetchJobID("c", "http://a.test/none"), "test/frontier"); !errors.Is(err, job.ErrNotFound) {
		t.Errorf("missing job: %v, want job.ErrNotFound", err)
	}
}
