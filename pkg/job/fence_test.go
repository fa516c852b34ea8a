package job_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/job"
)

// reclaimed sets up the interleaving behind every fencing defect: agent
// w1's claim c1 is declared silent and recovered, managerd requeues the
// job, and another slot of the same agent claims it again as c2, at the
// very same path in-progress/w1/<id>. c1 then wakes up.
func reclaimed(t *testing.T, s *job.Spool, id string) (c1, c2 *job.Claimed) {
	t.Helper()
	c1 = claim(t, s, id)
	if _, err := s.RecoverLock(id, "watchdogd", "owner silent"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Move(id, job.Stale, job.Queued, "managerd", "requeued", nil); err != nil {
		t.Fatal(err)
	}
	c2, err := s.Claim(id, holder)
	if err != nil {
		t.Fatal(err)
	}
	if c1.Envelope().Runtime.Dir != c2.Envelope().Runtime.Dir {
		t.Fatalf("the two claims must share a path for this test: %s vs %s", c1.Envelope().Runtime.Dir, c2.Envelope().Runtime.Dir)
	}
	if c1.Token() == c2.Token() || c2.Token() == "" {
		t.Fatalf("tokens %q and %q must differ", c1.Token(), c2.Token())
	}
	return c1, c2
}

// Every write a stale claim could make is refused with ErrFenced, and
// leaves the newer claim's job.json, lock, staged temp file and control
// request exactly as they were.
func TestStaleClaimWritesNothing(t *testing.T) {
	t.Parallel()
	writes := map[string]func(c *job.Claimed) error{
		"heartbeat":         func(c *job.Claimed) error { return c.Heartbeat() },
		"commit-succeeded":  func(c *job.Claimed) error { return c.Commit(job.Succeeded, "", nil) },
		"commit-failed":     func(c *job.Claimed) error { return c.Commit(job.Failed, "exit 1", nil) },
		"commit-held":       func(c *job.Claimed) error { return c.Commit(job.Held, job.ReasonHeld, nil) },
		"commit-killed":     func(c *job.Claimed) error { return c.Commit(job.Killed, job.ReasonCancelled, nil) },
		"commit-stale":      func(c *job.Claimed) error { return c.Commit(job.Stale, "", nil) },
		"commit-queued":     func(c *job.Claimed) error { return c.Commit(job.Queued, "released", nil) },
		"record-handler":    func(c *job.Claimed) error { return c.RecordHandler(selfIdentity()) },
		"drop-control":      func(c *job.Claimed) error { return c.DropControl() },
		"handler-output":    func(c *job.Claimed) error { return c.Fence() },
		"heartbeat-twice":   func(c *job.Claimed) error { _ = c.Heartbeat(); return c.Heartbeat() },
		"commit-after-fail": func(c *job.Claimed) error { _ = c.Commit(job.Failed, "", nil); return c.Commit(job.Succeeded, "", nil) },
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			c1, c2 := reclaimed(t, s, "j1")
			dir := c2.Envelope().Runtime.Dir
			// The newer claim's own temp file (its commit is staging) and
			// an operator's control request addressed to it.
			writeRaw(t, filepath.Join(dir, ".job.json5551234"), []byte("staged by c2"))
			if err := s.RequestControl("w1", "j1", job.Control{Action: job.ControlHold}); err != nil {
				t.Fatal(err)
			}
			before := tree(t, s.Root)
			err := write(c1)
			if !errors.Is(err, job.ErrFenced) {
				t.Fatalf("stale %s = %v, want ErrFenced", name, err)
			}
			sameTree(t, before, tree(t, s.Root))
			if o := owner(t, s, "j1"); o.Token != c2.Token() {
				t.Fatalf("lock token %q, want the newer claim's %q", o.Token, c2.Token())
			}
			// The newer claim is untouched and finishes normally.
			if err := c2.Heartbeat(); err != nil {
				t.Fatalf("newer claim's heartbeat: %v", err)
			}
			if err := c2.Commit(job.Succeeded, "", nil); err != nil {
				t.Fatalf("newer claim's commit: %v", err)
			}
			j := readJob(t, s.JobDir(job.Succeeded, "", "j1"))
			if j.Attempts != 2 || j.ClaimToken != c2.Token() {
				t.Fatalf("final job.json: attempts %d token %q; want 2 and %q", j.Attempts, j.ClaimToken, c2.Token())
			}
			mustNotExist(t, s.LockPath("j1"))
		})
	}
}

// The claim's token is in the lock's owner file and in job.json.
func TestClaimTokenInLockAndJob(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	if c.Token() == "" {
		t.Fatal("no token")
	}
	if o := owner(t, s, "j1"); o.Token != c.Token() {
		t.Fatalf("owner token %q, claim %q", o.Token, c.Token())
	}
	if j := readJob(t, c.Envelope().Runtime.Dir); j.ClaimToken != c.Token() {
		t.Fatalf("job.json claim_token %q, claim %q", j.ClaimToken, c.Token())
	}
}

// A commit cut after its job.json replace (the move failed: ENOSPC, EIO)
// is rolled forward by calling Commit again, never walked away from.
func TestCommitRetryRollsForward(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	// Make the move fail: a file where the job's target directory must go.
	dst := s.JobDir(job.Succeeded, "", "j1")
	writeRaw(t, dst, []byte("in the way"))
	if err := c.Commit(job.Succeeded, "", nil); err == nil {
		t.Fatal("commit with its target blocked succeeded")
	}
	if j := readJob(t, c.Envelope().Runtime.Dir); j.Status != job.Succeeded {
		t.Fatalf("after the cut commit job.json says %s, want succeeded", j.Status)
	}
	if err := os.Remove(dst); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatalf("retried commit: %v", err)
	}
	only(t, s, "j1", dst)
	mustNotExist(t, s.LockPath("j1"))
	var n int
	for _, e := range events(t, dst) {
		if e.To == job.Succeeded {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d succeeded events, want 1", n)
	}
}

func selfIdentity() proc.Identity { return proc.Self() }
