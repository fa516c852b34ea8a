package job_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// holdFlock takes the flock a submitter holds on its build directory,
// through a descriptor of its own (flocks of two open file descriptions
// conflict even within one process), until the returned func is called.
func holdFlock(t *testing.T, dir string) (release func()) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			unix.Close(fd)
		}
	}
	t.Cleanup(release)
	return release
}

// RemoveTmpLeftover removes what a dead submit or a hostile hand left in
// tmp/ without following or blocking on anything, and leaves a build
// whose submitter holds its flock alone until the flock is gone.
func TestRemoveTmpLeftover(t *testing.T) {
	t.Parallel()
	s := setup(t)
	tmp := s.Path(job.TmpDir)
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.MkdirAll(filepath.Join(outside, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	mkdir := func(name string) string {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "sub", "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	live := mkdir("live.0a0b0c0d")
	release := holdFlock(t, live)
	dead := mkdir("dead.0a0b0c0d")
	linkToLive := filepath.Join(tmp, "link-to-live")
	linkOut := filepath.Join(tmp, "link-outside")
	fifo := filepath.Join(tmp, "fifo")
	huge := filepath.Join(tmp, "huge")
	for _, err := range []error{
		os.Symlink(live, linkToLive),
		os.Symlink(outside, linkOut),
		syscall.Mkfifo(fifo, 0o644),
		os.WriteFile(huge, nil, 0o644),
		os.Truncate(huge, 1<<40), // sparse
	} {
		if err != nil {
			t.Fatal(err)
		}
	}

	if !job.IsLiveBuild(live) || job.IsLiveBuild(dead) || job.IsLiveBuild(linkToLive) || job.IsLiveBuild(fifo) {
		t.Fatal("IsLiveBuild: want true for the flocked build only")
	}
	if err := job.RemoveTmpLeftover(live); !errors.Is(err, job.ErrBuilding) {
		t.Fatalf("live build: %v, want ErrBuilding", err)
	}
	for _, p := range []string{dead, linkToLive, linkOut, fifo, huge, filepath.Join(tmp, "missing")} {
		if err := job.RemoveTmpLeftover(p); err != nil {
			t.Fatalf("%s: %v", filepath.Base(p), err)
		}
	}
	if got := names(t, tmp); len(got) != 1 || got[0] != "live.0a0b0c0d" {
		t.Fatalf("tmp/ holds %v, want only the live build", got)
	}
	if _, err := os.Stat(filepath.Join(live, "sub", "f")); err != nil {
		t.Fatalf("the live build lost a file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "sub")); err != nil {
		t.Fatalf("a symlink was followed: %v", err)
	}
	release() // its submitter died
	if job.IsLiveBuild(live) {
		t.Fatal("IsLiveBuild after the flock was released")
	}
	if err := job.RemoveTmpLeftover(live); err != nil {
		t.Fatal(err)
	}
	dirEmpty(t, tmp)
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// observe installs o as fsq's observer for the rest of the test. Tests
// that use it are not parallel: the observer is process-wide.
func observe(t *testing.T, o fsq.Observer) {
	fsq.SetObserver(o)
	t.Cleanup(func() { fsq.SetObserver(nil) })
}

// While a batch waits in its first barrier (a sync that stalls), each of
// its builds is held: a sweep of any age leaves it alone.
func TestSubmitManyHoldsItsBuilds(t *testing.T) {
	s := setup(t)
	tmp := s.Path(job.TmpDir)
	var seen []string
	var sweepErrs []error
	observe(t, func(op fsq.Op, _, _ string) {
		if op != fsq.OpBarrier || seen != nil {
			return
		}
		seen = names(t, tmp)
		for _, n := range seen {
			if !job.IsLiveBuild(filepath.Join(tmp, n)) {
				sweepErrs = append(sweepErrs, errors.New(n+": not live"))
			}
			sweepErrs = append(sweepErrs, job.RemoveTmpLeftover(filepath.Join(tmp, n)))
		}
	})
	reqs := []job.SubmitRequest{{ID: "b1", Kind: "noop", Prompt: []byte(`{}`)}, {ID: "b2", Kind: "noop", Prompt: []byte(`{}`)}, {ID: "b3", Kind: "noop", Prompt: []byte(`{}`)}}
	_, errs := s.SubmitMany(reqs)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 || len(sweepErrs) != 3 {
		t.Fatalf("at the barrier tmp/ held %v; sweep: %v", seen, sweepErrs)
	}
	for _, err := range sweepErrs {
		if !errors.Is(err, job.ErrBuilding) {
			t.Errorf("sweep of a build under way: %v, want ErrBuilding", err)
		}
	}
	for _, id := range []string{"b1", "b2", "b3"} {
		if j := readJob(t, s.JobDir(job.Queued, "", id)); j.ID != id {
			t.Errorf("job %s reads as %s", id, j.ID)
		}
	}
	dirEmpty(t, tmp)
}

// A submitter that stalls between making its build directory and
// locking it for longer than the sweep's age finds it removed: it builds
// again in a new directory, and the job is submitted whole.
func TestSubmitRebuildsABuildSweptBeforeItsLock(t *testing.T) {
	s := setup(t)
	swept := 0
	observe(t, func(op fsq.Op, path, _ string) {
		if op == fsq.OpCreate && strings.HasSuffix(path, "/"+job.PromptFile) && swept == 0 {
			swept++
			if err := os.RemoveAll(filepath.Dir(path)); err != nil { // as a sweep before the flock
				t.Error(err)
			}
		}
	})
	j, err := s.Submit(job.SubmitRequest{ID: "re", Kind: "noop", Prompt: []byte(testPrompt)})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	dir := s.JobDir(job.Queued, "", j.ID)
	if got := readRaw(t, filepath.Join(dir, job.PromptFile)); string(got) != testPrompt || swept != 1 {
		t.Fatalf("prompt.json = %q after %d sweeps", got, swept)
	}
	if evs := events(t, dir); len(evs) != 1 {
		t.Fatalf("events = %+v", evs)
	}
	dirEmpty(t, s.Path(job.TmpDir))
}

// A build swept before its lock at every try: the submit fails, leaving
// nothing behind, after a bounded number of tries.
func TestSubmitGivesUpWhenEveryBuildIsSwept(t *testing.T) {
	s := setup(t)
	swept := 0
	observe(t, func(op fsq.Op, path, _ string) {
		if op == fsq.OpCreate && strings.HasSuffix(path, "/"+job.PromptFile) {
			swept++
			_ = os.RemoveAll(filepath.Dir(path))
		}
	})
	_, err := s.Submit(job.SubmitRequest{ID: "gone", Kind: "noop", Prompt: []byte(testPrompt)})
	if err == nil || !strings.Contains(err.Error(), "swept") || !strings.Contains(err.Error(), "submit gone") {
		t.Fatalf("Submit = %v, want a swept build's error", err)
	}
	if swept != 3 {
		t.Errorf("built %d times, want 3", swept)
	}
	if _, err := s.Locate("gone"); !errors.Is(err, job.ErrNotFound) {
		t.Errorf("Locate = %v, want ErrNotFound", err)
	}
	dirEmpty(t, s.Path(job.TmpDir))
}
