package fsq_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/fsq/fsqtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup returns a fresh directory on the real filesystem.
func setup(t *testing.T) string {
	t.Helper()
	return t.TempDir()
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

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustMkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestWriteFileReplacesAndLeavesNoTemp(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	p := filepath.Join(dir, "job.json")
	for _, v := range []string{"one\n", "two, longer\n", "3\n"} {
		if err := fsq.WriteFile(p, []byte(v)); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != v {
			t.Fatalf("content = %q, %v; want %q", got, err, v)
		}
	}
	if got := names(t, dir); !reflect.DeepEqual(got, []string{"job.json"}) {
		t.Fatalf("dir holds %q, want only job.json (no temp dot files)", got)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("perm = %v, %v; want 0644", fi.Mode().Perm(), err)
	}
	if err := fsq.WriteFile(p, []byte("x"), fsq.WithPerm(0o600), fsq.WithoutDirSync()); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("perm with WithPerm(0600) = %v, %v", fi.Mode().Perm(), err)
	}
}

// TestWriteFileAtomic checks that a concurrent reader only ever sees a
// complete old or complete new version, never a mix or a short file.
func TestWriteFileAtomic(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	p := filepath.Join(dir, "f")
	a := bytes.Repeat([]byte("a"), 64<<10)
	b := bytes.Repeat([]byte("b"), 128<<10)
	if err := fsq.WriteFile(p, a); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := os.ReadFile(p)
			if err != nil {
				bad = err
				return
			}
			if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
				bad = fmt.Errorf("reader saw a torn file of %d bytes", len(got))
				return
			}
		}
	}()
	for i := 0; i < 40; i++ {
		data := a
		if i%2 == 0 {
			data = b
		}
		if err := fsq.WriteFile(p, data, fsq.WithoutDirSync()); err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if bad != nil {
		t.Fatal(bad)
	}
	if got := names(t, dir); !reflect.DeepEqual(got, []string{"f"}) {
		t.Fatalf("dir holds %q after writes, want only f", got)
	}
}

func TestWriteFileVanishedDir(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	err := fsq.WriteFile(filepath.Join(dir, "gone", "job.json"), []byte("x"))
	if !errors.Is(err, fsq.ErrVanished) {
		t.Fatalf("WriteFile into a missing dir = %v, want ErrVanished", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("WriteFile recreated the vanished dir: %v", err)
	}
}

func TestCreateFile(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	p := filepath.Join(dir, "prompt.json")
	if err := fsq.CreateFile(p, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	err := fsq.CreateFile(p, []byte("other"))
	if !errors.Is(err, fsq.ErrExists) {
		t.Fatalf("second CreateFile = %v, want ErrExists", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "{}" {
		t.Fatalf("CreateFile overwrote the file: %q", got)
	}
}

func TestRename(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	src := filepath.Join(dir, "a", "job1")
	mustMkdir(t, src)
	mustWrite(t, filepath.Join(src, "job.json"), "1")
	mustMkdir(t, filepath.Join(dir, "b"))

	t.Run("moves a directory across parents", func(t *testing.T) {
		dst := filepath.Join(dir, "b", "job1")
		if err := fsq.Rename(src, dst); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(dst, "job.json")); err != nil || string(got) != "1" {
			t.Fatalf("moved content = %q, %v", got, err)
		}
		if _, err := os.Lstat(src); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("source still there: %v", err)
		}
		if err := fsq.Rename(dst, src); err != nil { // and back
			t.Fatal(err)
		}
	})
	t.Run("refuses an existing empty directory", func(t *testing.T) {
		dst := filepath.Join(dir, "b", "empty")
		mustMkdir(t, dst)
		err := fsq.Rename(src, dst)
		if !errors.Is(err, fsq.ErrExists) {
			t.Fatalf("Rename onto an empty dir = %v, want ErrExists", err)
		}
		if _, err := os.Stat(filepath.Join(src, "job.json")); err != nil {
			t.Fatalf("source damaged: %v", err)
		}
		if got := names(t, dst); len(got) != 0 {
			t.Fatalf("destination changed: %q", got)
		}
	})
	t.Run("refuses an existing file", func(t *testing.T) {
		dst := filepath.Join(dir, "b", "file")
		mustWrite(t, dst, "keep")
		if err := fsq.Rename(src, dst); !errors.Is(err, fsq.ErrExists) {
			t.Fatalf("Rename onto a file = %v, want ErrExists", err)
		}
		if got, _ := os.ReadFile(dst); string(got) != "keep" {
			t.Fatalf("destination replaced: %q", got)
		}
	})
	t.Run("missing source is ErrVanished", func(t *testing.T) {
		dst := filepath.Join(dir, "b", "x")
		err := fsq.Rename(filepath.Join(dir, "a", "nope"), dst)
		if !errors.Is(err, fsq.ErrVanished) {
			t.Fatalf("Rename of a missing source = %v, want ErrVanished", err)
		}
		if _, err := os.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("destination appeared: %v", err)
		}
	})
}

func TestRemoveAll(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	p := filepath.Join(dir, "x")
	mustMkdir(t, filepath.Join(p, "y"))
	if err := fsq.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("still there: %v", err)
	}
	if err := fsq.RemoveAll(p); err != nil {
		t.Fatalf("RemoveAll of a missing path = %v, want nil", err)
	}
}

func TestLock(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	lock := filepath.Join(dir, "job1.lock")
	if _, err := fsq.ReadOwner(lock); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadOwner of no lock = %v, want ErrNotExist", err)
	}
	if err := fsq.TryLock(lock, []byte("me\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := fsq.ReadOwner(lock); err != nil || string(got) != "me\n" {
		t.Fatalf("ReadOwner = %q, %v", got, err)
	}
	if err := fsq.TryLock(lock, []byte("you\n")); !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("second TryLock = %v, want ErrLocked", err)
	}
	if got, _ := fsq.ReadOwner(lock); string(got) != "me\n" {
		t.Fatalf("failed TryLock changed the owner to %q", got)
	}
	if err := fsq.Unlock(lock); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(lock); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lock still there after Unlock: %v", err)
	}
	if err := fsq.Unlock(lock); err != nil {
		t.Fatalf("Unlock of a free lock = %v, want nil", err)
	}
	if err := fsq.TryLock(lock, []byte("you\n")); err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	if err := fsq.TryLock(filepath.Join(dir, "nodir", "j.lock"), nil); err == nil || errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("TryLock in a missing dir = %v, want a non-ErrLocked error", err)
	}
}

func TestLockHostile(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	target := filepath.Join(dir, "elsewhere")
	mustMkdir(t, target)

	// A symlink planted as the lock counts as held and is never written
	// through.
	lock := filepath.Join(dir, "j.lock")
	if err := os.Symlink(target, lock); err != nil {
		t.Fatal(err)
	}
	if err := fsq.TryLock(lock, []byte("x")); !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("TryLock on a symlink = %v, want ErrLocked", err)
	}
	if got := names(t, target); len(got) != 0 {
		t.Fatalf("TryLock wrote through the symlink: %q", got)
	}

	// A symlink planted as the owner file is refused.
	lock2 := filepath.Join(dir, "k.lock")
	mustMkdir(t, lock2)
	mustWrite(t, filepath.Join(target, "secret"), "s")
	if err := os.Symlink(filepath.Join(target, "secret"), filepath.Join(lock2, fsq.OwnerFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := fsq.ReadOwner(lock2); !errors.Is(err, fsq.ErrSymlink) {
		t.Fatalf("ReadOwner through a symlink = %v, want ErrSymlink", err)
	}
	// Unlock removes the lock directory, never what a link points at.
	if err := fsq.Unlock(lock2); err != nil {
		t.Fatal(err)
	}
	if err := fsq.Unlock(lock); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(target, "secret")); err != nil || string(got) != "s" {
		t.Fatalf("symlink target damaged: %q, %v", got, err)
	}
}

func TestReadFileNoFollow(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	p := filepath.Join(dir, "f")
	mustWrite(t, p, "data")
	if got, err := fsq.ReadFileNoFollow(p); err != nil || string(got) != "data" {
		t.Fatalf("ReadFileNoFollow = %q, %v", got, err)
	}
	link := filepath.Join(dir, "l")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if _, err := fsq.ReadFileNoFollow(link); !errors.Is(err, fsq.ErrSymlink) {
		t.Fatalf("via symlink = %v, want ErrSymlink", err)
	}
	if _, err := fsq.ReadFileNoFollow(dir); err == nil {
		t.Fatal("reading a directory succeeded")
	}
	if _, err := fsq.ReadFileNoFollow(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing = %v, want ErrNotExist", err)
	}
}

func TestScanDir(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	for _, d := range []string{"b", "a", "c", ".hidden-dir"} {
		mustMkdir(t, filepath.Join(dir, d))
	}
	mustWrite(t, filepath.Join(dir, ".job.json123"), "temp")
	mustWrite(t, filepath.Join(dir, "plain"), "x")
	if err := os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	got, err := fsq.ScanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c"}; !reflect.DeepEqual(got.Dirs, want) {
		t.Fatalf("Dirs = %q, want %q", got.Dirs, want)
	}
	sort.Strings(got.Hostile)
	if want := []string{"dangling", "link", "plain"}; !reflect.DeepEqual(got.Hostile, want) {
		t.Fatalf("Hostile = %q, want %q", got.Hostile, want)
	}

	none, err := fsq.ScanDir(filepath.Join(dir, "missing"))
	if err != nil || len(none.Dirs)+len(none.Hostile) != 0 {
		t.Fatalf("ScanDir of a missing dir = %+v, %v; want empty, nil", none, err)
	}
}

func TestIsRealDir(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	mustWrite(t, filepath.Join(dir, "f"), "")
	if err := os.Symlink(dir, filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"": true, "f": false, "l": false} {
		got, err := fsq.IsRealDir(filepath.Join(dir, name))
		if err != nil || got != want {
			t.Errorf("IsRealDir(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := fsq.IsRealDir(filepath.Join(dir, "none")); err == nil {
		t.Error("IsRealDir of a missing path: no error")
	}
}

func TestAppendLine(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	p := filepath.Join(dir, "events.jsonl")
	for _, l := range []string{`{"n":1}`, `{"n":2}`} {
		if err := fsq.AppendLine(p, []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := os.ReadFile(p); string(got) != "{\"n\":1}\n{\"n\":2}\n" {
		t.Fatalf("content = %q", got)
	}
	target := filepath.Join(dir, "target")
	mustWrite(t, target, "keep\n")
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := fsq.AppendLine(link, []byte("x")); err == nil {
		t.Fatal("AppendLine through a symlink succeeded")
	}
	if got, _ := os.ReadFile(target); string(got) != "keep\n" {
		t.Fatalf("symlink target changed: %q", got)
	}
	if err := fsq.AppendLine(filepath.Join(dir, "gone", "e"), []byte("x")); !errors.Is(err, fsq.ErrVanished) {
		t.Fatalf("AppendLine into a missing dir = %v, want ErrVanished", err)
	}
}

// TestAppendLineHostile: an append never blocks on, follows or writes into
// what a hostile hand planted where a JSON Lines file belongs (a FIFO with
// no reader blocked the open for good before).
func TestAppendLineHostile(t *testing.T) {
	t.Parallel()
	appends := map[string]func(string, []byte) error{"AppendLine": fsq.AppendLine, "AppendLineUnsynced": fsq.AppendLineUnsynced}
	for _, kind := range []string{fsqtest.FIFO, fsqtest.Socket, fsqtest.Directory, fsqtest.Symlink} {
		for name, appendFn := range appends {
			t.Run(kind+"/"+name, func(t *testing.T) {
				t.Parallel()
				p := filepath.Join(setup(t), "outcomes.jsonl")
				fsqtest.PlantHostile(t, p, kind)
				before, _ := os.Lstat(p)
				done := make(chan error, 1)
				go func() { done <- appendFn(p, []byte(`{"n":1}`)) }()
				select {
				case err := <-done:
					if err == nil {
						t.Fatalf("%s into a %s succeeded", name, kind)
					}
					if !fsq.IsHostile(err) {
						t.Errorf("%s into a %s = %v, want a hostile-entry error", name, kind, err)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s into a %s still blocked after 5s", name, kind)
				}
				after, err := os.Lstat(p)
				if err != nil || after.Mode() != before.Mode() {
					t.Fatalf("the planted %s was changed: %v, %v", kind, after, err)
				}
			})
		}
	}
}

func TestMkdirDurable(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	p := filepath.Join(dir, "a", "b", "c")
	if err := fsq.MkdirDurable(p); err != nil {
		t.Fatal(err)
	}
	if ok, err := fsq.IsRealDir(p); !ok || err != nil {
		t.Fatalf("not created: %v %v", ok, err)
	}
	if err := fsq.MkdirDurable(p); err != nil {
		t.Fatalf("existing dir: %v", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if err := fsq.MkdirDurable(link); !errors.Is(err, fsq.ErrSymlink) {
		t.Fatalf("MkdirDurable on a symlink = %v, want ErrSymlink", err)
	}
}

// TestObserver is not parallel: the observer is package-global, and
// parallel tests only resume after every sequential test has finished.
func TestObserver(t *testing.T) {
	dir := setup(t)
	type rec struct {
		Op          fsq.Op
		Path, Path2 string
	}
	var got []rec
	rel := func(p string) string {
		if p == "" {
			return ""
		}
		r, err := filepath.Rel(dir, p)
		if err != nil {
			return p
		}
		return r
	}
	fsq.SetObserver(func(op fsq.Op, p, p2 string) {
		if strings.HasPrefix(p, dir) {
			got = append(got, rec{op, rel(p), rel(p2)})
		}
	})
	t.Cleanup(func() { fsq.SetObserver(nil) })

	mustMkdir(t, filepath.Join(dir, "a"))
	mustMkdir(t, filepath.Join(dir, "b"))
	steps := []func() error{
		func() error { return fsq.WriteFile(filepath.Join(dir, "a", "job.json"), []byte("{}")) },
		func() error { return fsq.AppendLine(filepath.Join(dir, "a", "ev"), []byte("1")) },
		func() error { return fsq.AppendLine(filepath.Join(dir, "a", "ev"), []byte("2")) },
		func() error { return fsq.TryLock(filepath.Join(dir, "j.lock"), []byte("o")) },
		func() error { return fsq.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b", "a")) },
		func() error { return fsq.Unlock(filepath.Join(dir, "j.lock")) },
	}
	for i, f := range steps {
		if err := f(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := []rec{
		{fsq.OpWrite, "a/job.json", ""},
		{fsq.OpSyncDir, "a", ""},
		{fsq.OpAppend, "a/ev", ""},
		{fsq.OpSyncDir, "a", ""}, // created: its directory is synced
		{fsq.OpAppend, "a/ev", ""},
		{fsq.OpMkdir, "j.lock", ""},
		{fsq.OpCreate, "j.lock/owner", ""},
		{fsq.OpRename, "a", "b/a"},
		{fsq.OpSyncDir, "b", ""}, // destination parent first
		{fsq.OpSyncDir, ".", ""},
		{fsq.OpRemove, "j.lock", ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("observed ops:\n got %v\nwant %v", got, want)
	}

	fsq.SetObserver(nil)
	n := len(got)
	if err := fsq.WriteFile(filepath.Join(dir, "b", "x"), nil); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("removed observer still called: %v", got[n:])
	}
}

// Unlock of a symlink planted in a lock's place removes the link and
// never touches what it points to.
func TestUnlockSymlinkLeavesTarget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, fsq.OwnerFile), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, "x.lock")
	if err := os.Symlink(target, lock); err != nil {
		t.Fatal(err)
	}
	if err := fsq.Unlock(lock); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(lock); !os.IsNotExist(err) {
		t.Fatalf("symlink still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(target, fsq.OwnerFile)); err != nil || string(b) != "keep" {
		t.Fatalf("target's file touched: %q, %v", b, err)
	}
}
