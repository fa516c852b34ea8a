package job_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// A process killed in the middle of an atomic write (heartbeat, commit,
// control request) leaves a temp file in the job directory. The next
// transaction that moves the job removes it, so that it never travels into
// the job's final state; a handler's own dot files are left alone.
func TestTransactionsDropInterruptedWriteTemps(t *testing.T) {
	t.Parallel()
	// Abandoned temps are older than job.TempGrace; a fresh one may be
	// another writer's (a control request being written) and stays,
	// except in recovery, whose holder is proven gone.
	old := time.Now().Add(-2 * job.TempGrace)
	plant := func(t *testing.T, dir string) {
		t.Helper()
		for _, name := range []string{".job.json8172635", ".control.json42", ".handler-cache"} {
			writeRaw(t, filepath.Join(dir, name), []byte("partial"))
			if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
				t.Fatal(err)
			}
		}
		writeRaw(t, filepath.Join(dir, ".control.json77"), []byte("being written"))
	}
	check := func(t *testing.T, dir string) {
		t.Helper()
		mustNotExist(t, filepath.Join(dir, ".job.json8172635"))
		mustNotExist(t, filepath.Join(dir, ".control.json42"))
		mustExist(t, filepath.Join(dir, ".handler-cache"))
	}
	fresh := func(t *testing.T, dir string, want bool) {
		t.Helper()
		if exists(filepath.Join(dir, ".control.json77")) != want {
			t.Errorf("fresh temp of another writer: exists=%v, want %v", !want, want)
		}
	}
	t.Run("commit", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		c := claim(t, s, "j1")
		plant(t, c.Envelope().Runtime.Dir)
		if err := c.Commit(job.Succeeded, "", nil); err != nil {
			t.Fatal(err)
		}
		check(t, s.JobDir(job.Succeeded, "", "j1"))
		fresh(t, s.JobDir(job.Succeeded, "", "j1"), true)
	})
	t.Run("move", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		submit(t, s, "j1")
		plant(t, s.JobDir(job.Queued, "", "j1"))
		if _, err := s.Move("j1", job.Queued, job.Killed, "farroctl", "cancelled", nil); err != nil {
			t.Fatal(err)
		}
		check(t, s.JobDir(job.Killed, "", "j1"))
		fresh(t, s.JobDir(job.Killed, "", "j1"), true)
	})
	t.Run("recovery", func(t *testing.T) {
		t.Parallel()
		s := setup(t)
		c := claim(t, s, "j1")
		plant(t, c.Envelope().Runtime.Dir)
		// Its agent died: a lock of a process that cannot exist.
		if err := os.RemoveAll(s.LockPath("j1")); err != nil {
			t.Fatal(err)
		}
		deadOwner(t, s, "j1")
		if _, err := s.RecoverLock("j1", "watchdogd", "owner died"); err != nil {
			t.Fatal(err)
		}
		check(t, s.JobDir(job.Stale, "", "j1"))
		fresh(t, s.JobDir(job.Stale, "", "j1"), false)
		if _, err := os.Stat(s.LockPath("j1")); !os.IsNotExist(err) {
			t.Fatalf("lock left: %v", err)
		}
	})
}
