package job_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

func TestJudgeHolder(t *testing.T) {
	t.Parallel()
	s := setup(t)
	const grace = time.Second

	claim(t, s, "live")
	h := job.ReadLockHolder(s.LockPath("live"))
	if j := job.JudgeHolder(h, 0, grace); !j.Live || j.Dead {
		t.Fatalf("a live claim: %+v", j)
	}
	if !h.Unchanged(s.LockPath("live")) || string(h.Judged()) != string(h.Raw) {
		t.Fatal("an untouched lock reads as changed")
	}
	if reason := job.SilentReason(h, 42*time.Second); !strings.Contains(reason, "no heartbeat for 42s") || !strings.Contains(reason, "agentd/w1") {
		t.Fatalf("silent reason %q", reason)
	}

	submit(t, s, "dead")
	deadOwner(t, s, "dead")
	if j := job.JudgeHolder(job.ReadLockHolder(s.LockPath("dead")), 0, grace); !j.Dead || j.Verdict != "pid gone" || !strings.Contains(j.Reason, "owner died: pid gone") {
		t.Fatalf("a dead owner: %+v", j)
	}

	// No owner file: nothing within the grace (being created), dead after.
	lock := s.LockPath("ownerless")
	if err := os.Mkdir(lock, 0o755); err != nil {
		t.Fatal(err)
	}
	none := job.ReadLockHolder(lock)
	if j := job.JudgeHolder(none, grace/2, grace); j.Dead || j.Live {
		t.Fatalf("an ownerless lock within the grace: %+v", j)
	}
	if j := job.JudgeHolder(none, grace, grace); !j.Dead || j.Verdict != job.VerdictNoOwner {
		t.Fatalf("an ownerless lock past the grace: %+v", j)
	}
	if none.Judged() == nil || len(none.Judged()) != 0 {
		t.Fatal("a lock judged without an owner file must be judged as an empty owner")
	}
	// A FIFO as owner file never blocks the read: an unreadable owner,
	// so the lock judged without one still holds what was judged.
	if err := syscall.Mkfifo(filepath.Join(lock, fsq.OwnerFile), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := job.ReadLockHolder(lock)
	if !none.Unchanged(lock) {
		t.Fatal("a lock still without a readable owner reads as changed")
	}
	if j := job.JudgeHolder(fifo, grace, grace); !j.Dead || j.Verdict != job.VerdictBadOwner {
		t.Fatalf("a FIFO as owner file: %+v", j)
	}
	if h.Unchanged(lock) {
		t.Fatal("another lock's owner reads as unchanged")
	}
}

func TestReadEvents(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	if err := c.Commit(job.Failed, "exit 1", nil); err != nil {
		t.Fatal(err)
	}
	dir := s.JobDir(job.Failed, "", "j1")
	f, err := os.OpenFile(filepath.Join(dir, job.EventsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"time":"2026-`) // a torn last line
	_ = f.Close()
	evs, bad, err := job.ReadEvents(dir)
	if err != nil || bad != 1 || len(evs) != 3 {
		t.Fatalf("ReadEvents: %d events, %d bad, %v", len(evs), bad, err)
	}
	if evs[0].To != job.Queued || evs[1].To != job.InProgress || evs[2].To != job.Failed || evs[2].Reason != "exit 1" {
		t.Fatalf("events: %+v", evs)
	}
	// A FIFO planted as events.jsonl is refused, not waited on.
	other := s.JobDir(job.Queued, "", submit(t, s, "j2").ID)
	_ = os.Remove(filepath.Join(other, job.EventsFile))
	if err := syscall.Mkfifo(filepath.Join(other, job.EventsFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := job.ReadEvents(other); err == nil || !fsq.IsHostile(err) {
		t.Fatalf("ReadEvents of a FIFO: %v", err)
	}
}
