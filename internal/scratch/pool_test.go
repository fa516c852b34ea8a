package scratch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func take(t *testing.T, p *Pool, id, prompt string) string {
	t.Helper()
	dir, written, err := p.Take(id, []byte(prompt))
	if err != nil {
		t.Fatalf("take %s: %v", id, err)
	}
	if !written {
		t.Fatalf("take %s: prompt not written", id)
	}
	if got := readFile(t, filepath.Join(dir, job.PromptFile)); got != prompt {
		if len(got) > 80 {
			got = got[:80] + "..."
		}
		t.Fatalf("take %s: prompt.json is %q, want %q", id, got, prompt)
	}
	return dir
}

func touch(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A directory with no output goes back to the pool and is the next job's:
// same directory inode, same prompt.json inode, empty first-attempt logs
// kept as spares; a longer earlier prompt leaves nothing in a shorter one.
func TestPoolRecyclesWithoutOutput(t *testing.T) {
	t.Parallel()
	agentDir := filepath.Join(t.TempDir(), "w1")
	p := NewPool(agentDir)
	long := `{"text":"` + string(slices.Repeat([]byte("x"), 5000)) + `"}`
	d1 := take(t, p, "job-1", long)
	if d1 != filepath.Join(agentDir, "job-1") {
		t.Fatalf("dir %s", d1)
	}
	dirIno, promptIno := inode(t, d1), inode(t, filepath.Join(d1, job.PromptFile))
	touch(t, filepath.Join(d1, job.OutputFile(job.Stdout, 1)), "")
	touch(t, filepath.Join(d1, job.OutputFile(job.Stderr, 1)), "")
	touch(t, filepath.Join(d1, job.OutputFile(job.Stderr, 2)), "")
	if !p.Give(d1) {
		t.Fatal("a directory without output was not recycled")
	}
	if _, err := os.Lstat(d1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("recycled directory still at its job's name: %v", err)
	}
	d2 := take(t, p, "job-2", `{"n":2}`) // take checks the whole content
	if inode(t, d2) != dirIno || inode(t, filepath.Join(d2, job.PromptFile)) != promptIno {
		t.Fatal("the second job's directory or prompt.json is a new inode")
	}
	names, _ := fsq.ReadNames(d2)
	slices.Sort(names)
	if want := []string{job.PromptFile, job.OutputFile(job.Stderr, 1), job.OutputFile(job.Stdout, 1)}; !slices.Equal(names, want) {
		t.Fatalf("recycled directory holds %v, want %v", names, want)
	}
}

// A directory with output, or with anything the handler made, is kept.
func TestPoolKeepsOutput(t *testing.T) {
	t.Parallel()
	agentDir := filepath.Join(t.TempDir(), "w1")
	p := NewPool(agentDir)
	for id, made := range map[string]string{"out": job.OutputFile(job.Stdout, 1), "made": "result.txt", "err2": job.OutputFile(job.Stderr, 3)} {
		d := take(t, p, id, `{}`)
		touch(t, filepath.Join(d, made), "hello\n")
		if p.Give(d) {
			t.Fatalf("%s: a directory holding %s was recycled", id, made)
		}
		if got := readFile(t, filepath.Join(d, made)); got != "hello\n" {
			t.Fatalf("%s: kept output is %q", id, got)
		}
	}
	d := take(t, p, "sub", `{}`)
	if err := os.Mkdir(filepath.Join(d, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p.Give(d) {
		t.Fatal("a directory holding a subdirectory was recycled")
	}
}

// What is found in the pool directory that is not a plain directory of
// spare files (a symlink, a FIFO, a file, an entry holding more) is
// removed, never followed, opened or reused; Take never blocks on it.
func TestPoolRefusesHostileEntries(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	agentDir := filepath.Join(root, "w1")
	pool := filepath.Join(agentDir, PoolDir)
	outside := filepath.Join(root, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	touch(t, filepath.Join(outside, job.PromptFile), "outside")
	if err := os.MkdirAll(pool, 0o755); err != nil {
		t.Fatal(err)
	}
	mk := func(name string) string {
		d := filepath.Join(pool, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	if err := os.Symlink(outside, filepath.Join(pool, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(pool, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	touch(t, filepath.Join(pool, "file"), "x")
	touch(t, filepath.Join(mk("extra"), "old-output.txt"), "secret")
	touch(t, filepath.Join(mk("empty-extra"), "made-by-handler"), "")
	touch(t, filepath.Join(mk("logs"), job.OutputFile(job.Stdout, 1)), "old output")
	if err := os.Symlink(filepath.Join(outside, job.PromptFile), filepath.Join(mk("plink"), job.PromptFile)); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(mk("pfifo"), job.PromptFile), 0o644); err != nil {
		t.Fatal(err)
	}
	p := NewPool(agentDir)
	for i, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		d := take(t, p, id, `{"i":`+string(rune('0'+i))+`}`)
		names, _ := fsq.ReadNames(d)
		if !slices.Equal(names, []string{job.PromptFile}) {
			t.Fatalf("%s: directory given holds %v", id, names)
		}
	}
	if got := readFile(t, filepath.Join(outside, job.PromptFile)); got != "outside" {
		t.Fatalf("a symlink was followed: the outside file holds %q", got)
	}
	if left, _ := fsq.ReadNames(pool); len(left) != 0 {
		t.Fatalf("hostile entries left in the pool: %v", left)
	}
}

// A directory already at the job's name (an earlier attempt's, kept for
// its output) is used as it is and its prompt left to the caller; a
// symlink there is refused. While two attempts use one directory, the
// first to end does not recycle it.
func TestPoolExistingDirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	agentDir := filepath.Join(root, "w1")
	p := NewPool(agentDir)
	d := take(t, p, "j", `{}`)
	dir, written, err := p.Take("j", []byte(`{}`))
	if err != nil || written || dir != d {
		t.Fatalf("second take of j: %s %v %v", dir, written, err)
	}
	if p.Give(d) {
		t.Fatal("recycled while another attempt uses it")
	}
	if !p.Give(d) {
		t.Fatal("not recycled once both attempts are over")
	}
	if p.Give(d) {
		t.Fatal("a directory not taken was recycled")
	}
	if err := os.Symlink(root, filepath.Join(agentDir, "s")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Take("s", []byte(`{}`)); err == nil {
		t.Fatal("a symlink at the job's name was used")
	}
	if _, _, err := p.Take("../x", []byte(`{}`)); err == nil {
		t.Fatal("a job id with a slash was accepted")
	}
}

// The sweeper removes the directories due, a bounded number of entries a
// pass (a cursor covers them all over passes), never the pool, never
// through a symlink.
func TestSweeperRemovesDueOnly(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	outside := t.TempDir()
	touch(t, filepath.Join(outside, "gone-1"), "keep me")
	var all []string
	for _, a := range []string{"w1", "w2"} {
		p := NewPool(filepath.Join(root, a))
		for _, id := range []string{"gone-1", "gone-2", "keep-1", "keep-2", "keep-3"} {
			all = append(all, take(t, p, id, `{}`))
		}
		if !p.Give(take(t, p, "spare", `{}`)) {
			t.Fatal("not recycled")
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "w3")); err != nil {
		t.Fatal(err)
	}
	touch(t, filepath.Join(root, "w1", trashPrefix+"left"), "a removal cut short")
	asked := map[string]int{}
	due := func(_ context.Context, ids []string) (map[string]bool, error) {
		if len(ids) > 3 {
			t.Errorf("a pass of at most 3 entries asked about %d jobs", len(ids))
		}
		out := map[string]bool{}
		for _, id := range ids {
			asked[id]++
			if id == "gone-1" || id == "gone-2" {
				out[id] = true
			}
		}
		return out, nil
	}
	s := NewSweeper(root)
	defer s.Close()
	var removed []string
	for pass := 0; pass < 10; pass++ {
		r, err := s.Pass(context.Background(), 3, due)
		if err != nil {
			t.Fatal(err)
		}
		removed = append(removed, r...)
	}
	slices.Sort(removed)
	want := []string{filepath.Join(root, "w1", "gone-1"), filepath.Join(root, "w1", "gone-2"), filepath.Join(root, "w2", "gone-1"), filepath.Join(root, "w2", "gone-2")}
	if !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	for _, d := range all {
		_, err := os.Lstat(d)
		if gone := slices.Contains(want, d); gone != errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: %v", d, err)
		}
	}
	for _, id := range []string{"keep-1", "keep-2", "keep-3"} {
		if asked[id] == 0 {
			t.Fatalf("%s never examined in ten passes", id)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "w1", trashPrefix+"left")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover of a removal: %v", err)
	}
	for _, a := range []string{"w1", "w2"} {
		if n, _ := fsq.ReadNames(filepath.Join(root, a, PoolDir)); len(n) != 1 {
			t.Fatalf("%s's pool: %v", a, n)
		}
	}
	if got := readFile(t, filepath.Join(outside, "gone-1")); got != "keep me" {
		t.Fatal("the sweeper followed a symlink")
	}
}
