package job_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/fsq/fsqtest"
	"github.com/farro-dev/farro/pkg/job"
)

// claimPromptly runs Claim with a deadline, so that a read that blocks
// (open(2) of a FIFO) fails the test instead of hanging it.
func claimPromptly(t *testing.T, s *job.Spool, id string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		c, err := s.Claim(id, holder)
		if err == nil {
			_ = c.Commit(job.Succeeded, "", nil)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		// Unblock a FIFO open so the goroutine ends.
		for _, f := range []string{job.JobFile, job.PromptFile} {
			p := filepath.Join(s.JobDir(job.Queued, "", id), f)
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		<-done
		t.Fatalf("Claim %s blocked for 5s", id)
		return nil
	}
}

// A hostile job.json or prompt.json makes Claim return ErrCorrupt at once
// and quarantines the job with a note (F3, F13).
func TestClaimQuarantinesHostileFiles(t *testing.T) {
	t.Parallel()
	for _, file := range []string{job.JobFile, job.PromptFile} {
		for _, kind := range fsqtest.HostileKinds {
			t.Run(file+"/"+kind, func(t *testing.T) {
				t.Parallel()
				s := setup(t)
				submit(t, s, "j1")
				fsqtest.PlantHostile(t, filepath.Join(s.JobDir(job.Queued, "", "j1"), file), kind)
				if err := claimPromptly(t, s, "j1"); !errors.Is(err, job.ErrCorrupt) {
					t.Fatalf("Claim = %v, want ErrCorrupt", err)
				}
				entry := quarantined(t, s, "j1")
				fi, err := os.Lstat(filepath.Join(entry, file))
				if err != nil {
					t.Fatalf("the hostile %s did not travel with the job: %v", file, err)
				}
				if fi.Mode().IsRegular() != (kind == fsqtest.Sparse) {
					t.Fatalf("quarantined %s has mode %v", file, fi.Mode())
				}
			})
		}
	}
}

// A 1 GiB prompt.json is quarantined without being read: the process does
// not allocate anything near its size (F13: it used to be read whole).
// Not parallel, so that the allocation count is this test's alone.
func TestClaimDoesNotReadAHugePrompt(t *testing.T) {
	s := setup(t)
	submit(t, s, "big")
	fsqtest.PlantHostile(t, filepath.Join(s.JobDir(job.Queued, "", "big"), job.PromptFile), fsqtest.Sparse)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := s.Claim("big", holder)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, job.ErrCorrupt) || !errors.Is(err, fsq.ErrTooLarge) {
		t.Fatalf("Claim = %v, want ErrCorrupt (ErrTooLarge)", err)
	}
	quarantined(t, s, "big")
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Fatalf("Claim allocated %d MiB for a prompt it must not read", alloc>>20)
	}
}

// A job.json bigger than MaxJobFileSize is corrupt, and one at the cap is
// read.
func TestReadJobCap(t *testing.T) {
	t.Parallel()
	s := setup(t)
	submit(t, s, "j1")
	dir := s.JobDir(job.Queued, "", "j1")
	raw := readRaw(t, filepath.Join(dir, job.JobFile))
	// Pad with trailing whitespace, which JSON ignores.
	pad := func(n int) []byte {
		return append(append([]byte{}, raw...), []byte(strings.Repeat(" ", n-len(raw)))...)
	}
	writeRaw(t, filepath.Join(dir, job.JobFile), pad(job.MaxJobFileSize))
	if _, err := job.ReadJob(dir); err != nil {
		t.Fatalf("job.json of exactly the cap: %v", err)
	}
	writeRaw(t, filepath.Join(dir, job.JobFile), pad(job.MaxJobFileSize+1))
	if _, err := job.ReadJob(dir); !errors.Is(err, job.ErrCorrupt) || !errors.Is(err, fsq.ErrTooLarge) {
		t.Fatalf("job.json over the cap = %v, want ErrCorrupt (ErrTooLarge)", err)
	}
}

// A hostile control.json is reported as such (fsq.IsHostile) without
// blocking, so that the agent can move it away.
func TestReadControlHostile(t *testing.T) {
	t.Parallel()
	for _, kind := range fsqtest.HostileKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fsqtest.PlantHostile(t, filepath.Join(dir, job.ControlFile), kind)
			done := make(chan error, 1)
			go func() { _, err := job.ReadControl(dir); done <- err }()
			select {
			case err := <-done:
				if !fsq.IsHostile(err) {
					t.Fatalf("ReadControl = %v, want a hostile-entry error", err)
				}
			case <-time.After(5 * time.Second):
				if w, err := os.OpenFile(filepath.Join(dir, job.ControlFile), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
				<-done
				t.Fatal("ReadControl blocked for 5s")
			}
		})
	}
}

// F5: a lock whose owner file is not a regular file, judged without a
// readable owner, is recovered instead of "changed hands" forever.
func TestRecoverJudgedLockWithHostileOwner(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{fsqtest.Symlink, fsqtest.Directory, fsqtest.FIFO, fsqtest.Socket} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			submit(t, s, "j1")
			lock := s.LockPath("j1")
			if err := os.Mkdir(lock, 0o755); err != nil {
				t.Fatal(err)
			}
			fsqtest.PlantHostile(t, filepath.Join(lock, fsq.OwnerFile), kind)
			old := time.Now().Add(-time.Hour) // well past any lock grace
			if err := os.Chtimes(lock, old, old); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := s.RecoverJudgedLock("j1", "watchdogd", "owner file unreadable", []byte{})
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("RecoverJudgedLock = %v", err)
				}
			case <-time.After(5 * time.Second):
				if w, err := os.OpenFile(filepath.Join(lock, fsq.OwnerFile), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
				<-done
				t.Fatal("RecoverJudgedLock blocked for 5s")
			}
			mustNotExist(t, lock)
			if j := readJob(t, s.JobDir(job.Queued, "", "j1")); j.Status != job.Queued {
				t.Fatalf("job status %s after recovery, want queued", j.Status)
			}
			if locs, err := s.Locate("j1"); err != nil || len(locs) != 1 {
				t.Fatalf("job found in %v (%v), want exactly one place", locs, err)
			}
			// And it can be claimed again.
			if err := claimPromptly(t, s, "j1"); err != nil {
				t.Fatalf("Claim after recovery: %v", err)
			}
		})
	}
}
