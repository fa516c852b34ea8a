package pgstore

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// claimPlaced claims one job as agent w and checks its working directory
// holds exactly its prompt, written by the store.
func claimPlaced(t *testing.T, s *Store, prompt string) store.Claim {
	t.Helper()
	c := claimOne(t, s, "w", time.Minute)
	if p, ok := c.(interface{ PromptPlaced() bool }); !ok || !p.PromptPlaced() {
		t.Fatal("the claim's prompt was not placed in its working directory")
	}
	b, err := os.ReadFile(filepath.Join(c.Dir(), job.PromptFile))
	if err != nil || string(b) != prompt {
		t.Fatalf("prompt.json of %s: %q %v, want %q", c.Job().ID, b, err, prompt)
	}
	return c
}

// A job whose attempt left no output gives its working directory to the
// next job: the same inode, and nothing of the longer earlier prompt in
// the shorter one. A job with output keeps its directory.
func TestWorkingDirectoryRecycled(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	long := `{"text":"` + string(slices.Repeat([]byte("y"), 3000)) + `"}`
	j1 := submit(t, s, job.SubmitRequest{Prompt: []byte(long)})[0]
	c1 := claimPlaced(t, s, long)
	if c1.Job().ID != j1.ID || c1.Dir() != filepath.Join(s.scratch, "w", j1.ID) {
		t.Fatalf("claim %s dir %s", c1.Job().ID, c1.Dir())
	}
	ino := inodeOf(t, c1.Dir())
	if err := c1.Commit(ctxT(t), job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(c1.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a working directory without output was kept: %v", err)
	}
	submit(t, s, job.SubmitRequest{Prompt: []byte(`{"n":2}`)})
	c2 := claimPlaced(t, s, `{"n":2}`)
	if inodeOf(t, c2.Dir()) != ino {
		t.Fatal("the second job's working directory is a new inode")
	}
	if err := os.WriteFile(filepath.Join(c2.Dir(), job.OutputFile(job.Stdout, 1)), []byte("result\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c2.Commit(ctxT(t), job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(c2.Dir(), job.OutputFile(job.Stdout, 1))); err != nil || string(b) != "result\n" {
		t.Fatalf("a job's output was not kept: %q %v", b, err)
	}
	submit(t, s, job.SubmitRequest{Prompt: []byte(`{"n":3}`)})
	c3 := claimPlaced(t, s, `{"n":3}`)
	if inodeOf(t, c3.Dir()) == ino {
		t.Fatal("a kept directory was given to another job")
	}
}

// The retention sweep removes the working directories of jobs no longer
// in the database and, with a retention, of jobs that succeeded or were
// killed longer ago; never a failed job's (while its row is there), a
// queued or running job's, or the pool.
func TestSweepScratch(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	jobs := submit(t, s, job.SubmitRequest{}, job.SubmitRequest{}, job.SubmitRequest{}, job.SubmitRequest{}, job.SubmitRequest{})
	dirs := map[string]string{}
	var cs []store.Claim
	for range jobs {
		c := claimOne(t, s, "w", time.Minute)
		cs = append(cs, c)
		dirs[c.Job().ID] = c.Dir()
		// Output: each directory is kept after its commit.
		if err := os.WriteFile(filepath.Join(c.Dir(), job.OutputFile(job.Stdout, 1)), []byte("out\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, recent, running, removed, failed := cs[0].Job().ID, cs[1].Job().ID, cs[2].Job().ID, cs[3].Job().ID, cs[4].Job().ID
	for _, c := range cs[:2] {
		if err := c.Commit(ctxT(t), job.Succeeded, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cs[3:] {
		if err := c.Commit(ctxT(t), job.Failed, "boom", nil); err != nil {
			t.Fatal(err)
		}
	}
	conn := sqlConn(t, url)
	if _, err := conn.Exec(ctxT(t), `UPDATE jobs SET finished_at = now() - interval '2 hours' WHERE id = ANY($1)`, []string{old, failed}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctxT(t), `DELETE FROM jobs WHERE id = $1`, removed); err != nil {
		t.Fatal(err)
	}
	sweep := func(retention time.Duration) []string {
		var got []string
		for range 3 { // a pass reads a slice; three cover this scratch
			r, err := s.SweepScratch(ctxT(t), retention)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r...)
		}
		return got
	}
	if got := sweep(0); !slices.Equal(got, []string{dirs[removed]}) {
		t.Fatalf("retention 0 removed %v, want only the deleted job's %s", got, dirs[removed])
	}
	if got := sweep(time.Hour); !slices.Equal(got, []string{dirs[old]}) {
		t.Fatalf("retention 1h removed %v, want only %s", got, dirs[old])
	}
	for _, id := range []string{recent, running, failed} {
		if _, err := os.Stat(filepath.Join(dirs[id], job.PromptFile)); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	if _, err := os.Stat(filepath.Join(s.scratch, "w", ".pool")); err != nil {
		t.Fatalf("the pool: %v", err)
	}
}
