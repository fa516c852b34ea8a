package farrob

import (
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/watchdog"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

func TestDeadHolderLeavesAJobTheWatchdogRecovers(t *testing.T) {
	t.Parallel()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ids, err := Fill(s, 3, "noop", job.Queued, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := DeadHolder(s.Root, ids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(s.LockPath(ids[1])); err != nil {
		t.Fatalf("the dead holder's lock: %v", err)
	}
	if err := watchdog.New(spoolstore.New(s), watchdog.Config{}, zerolog.Nop()).RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	at, ok := EventTime(s, ids[1], job.Stale, start)
	if !ok || at.Before(start) {
		t.Fatalf("job %s: no stale transition since %s (%s, %v)", ids[1], start, at, ok)
	}
	if _, ok := EventTime(s, ids[0], job.Stale, start); ok {
		t.Fatalf("job %s, never claimed, went to stale", ids[0])
	}
	if err := DeadHolder(s.Root, "no-such-job"); err == nil {
		t.Fatal("DeadHolder of a job that does not exist: no error")
	}
}

func TestFirstTransitionReadsTheLogInOrder(t *testing.T) {
	t.Parallel()
	log := t.TempDir() + "/agentd.log"
	lines := `{"level":"info","message":"ready"}
not json at all
{"level":"info","job_id":"a","event":{"type":"state_transition","from":"in-progress","to":"succeeded"}}
{"level":"info","job_id":"b","event":{"type":"state_transition","from":"queued","to":"in-progress"}}
{"level":"info","job_id":"c","event":{"type":"state_transition","from":"queued","to":"in-progress"}}
`
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	id, ok, err := FirstTransition(log, job.InProgress)
	if err != nil || !ok || id != "b" {
		t.Fatalf("first to in-progress: %q %v %v, want b", id, ok, err)
	}
	if _, ok, err := FirstTransition(log, job.Stale); err != nil || ok {
		t.Fatalf("first to stale: %v %v, want none", ok, err)
	}
}

// TestScaleProbesOnASmallSpool runs the scale section with the real
// daemons on a small queue: the priority job submitted last is agentd's
// first claim, the dead agent's job is recovered, the idle CPU is read.
func TestScaleProbesOnASmallSpool(t *testing.T) {
	t.Parallel()
	b := testBins(t)
	logs := t.TempDir()
	r, err := b.Scale(ScaleConfig{Base: t.TempDir(), LogDir: logs, Queued: 300, Claims: 10, BurnJobs: 50,
		Deferred: 30, IdleWindow: 500 * time.Millisecond,
		Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if r.PrioID == "" || r.FirstClaim != r.PrioID {
		t.Fatalf("agentd's first claim %q, want the priority job %q", r.FirstClaim, r.PrioID)
	}
	if r.PrioClaim <= 0 || r.PrioClaim > 30*time.Second {
		t.Fatalf("priority job claimed %s after agentd's start", r.PrioClaim)
	}
	if r.WDRecover <= 0 || r.WDRecover > 30*time.Second || r.WDPass <= 0 {
		t.Fatalf("dead agent's job recovered %s after watchdogd's start, pass %s", r.WDRecover, r.WDPass)
	}
	if r.Deferred != 30 {
		t.Fatalf("deferred %d, want 30", r.Deferred)
	}
	for name, v := range map[string]float64{"wd": r.IdleWD, "md": r.IdleMD, "done agent": r.DoneIdleAgent, "done md": r.DoneIdleMD, "done wd": r.DoneIdleWD} {
		if v < 0 || v > 1000 {
			t.Fatalf("idle CPU %s: %.2f ms/s", name, v)
		}
	}
	if r.FirstJob <= 0 || r.Burn.Jobs != 50 {
		t.Fatalf("first job %s, burn %+v", r.FirstJob, r.Burn)
	}
}
