package crash

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/farro-dev/farro/pkg/fsq"
)

// plDescribe lists a tree as sorted "path" (directories, with a slash) and
// "path=content" lines.
func plDescribe(t *plTree) string {
	var lines []string
	var walk func(ino int, path string)
	walk = func(ino int, path string) {
		n := t.nodes[ino]
		if !n.dir {
			lines = append(lines, path+"="+string(n.data))
			return
		}
		if path != "" {
			lines = append(lines, path+"/")
		}
		for name, k := range n.kids {
			p := name
			if path != "" {
				p = path + "/" + name
			}
			walk(k, p)
		}
	}
	walk(0, "")
	sort.Strings(lines)
	return strings.Join(lines, " ")
}

// plStatesAt records fn's operations on a directory holding the files of
// setup, and returns the distinct trees a power cut after the first cut
// operations (all of them if cut < 0) could leave, with temp files of
// atomic writes shown as ".tmp".
func plStatesAt(t *testing.T, setup map[string]string, fn func(root string), cut int) []string {
	t.Helper()
	root := filepath.Join(plScratch(t), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, data := range setup {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := newPLRecorder("model", root)
	if err := rec.start(); err != nil {
		t.Fatal(err)
	}
	fn(root)
	if err := rec.stop(); err != nil {
		t.Fatal(err)
	}
	l := rec.log
	if cut < 0 {
		cut = len(l.ops)
	}
	seen := map[string]bool{}
	l.enumerate(l.analyse(), cut, 1<<16, 1, func(s plState) {
		d := plDescribe(s.tree)
		for _, f := range strings.Fields(d) {
			if name, _, _ := strings.Cut(filepath.Base(f), "="); strings.HasPrefix(name, ".") {
				d = strings.Replace(d, name, ".tmp", 1)
			}
		}
		seen[d] = true
	})
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

func plExpectStates(t *testing.T, got []string, want ...string) {
	t.Helper()
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("states:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestPowerLossModel checks the model on single primitives against what
// the package comment promises.
func TestPowerLossModel(t *testing.T) {
	t.Run("create without dir fsync", func(t *testing.T) {
		// The file's content is fsynced, its name is not: absent or whole.
		got := plStatesAt(t, nil, func(root string) {
			if err := fsq.CreateFile(filepath.Join(root, "f"), []byte("hello")); err != nil {
				t.Fatal(err)
			}
		}, -1)
		plExpectStates(t, got, "", "f=hello")
	})
	t.Run("create before the file fsync", func(t *testing.T) {
		// Cut after create and write: the content may be lost or torn.
		got := plStatesAt(t, nil, func(root string) {
			if err := fsq.CreateFile(filepath.Join(root, "f"), []byte("hello")); err != nil {
				t.Fatal(err)
			}
		}, 2)
		plExpectStates(t, got, "", "f=", "f=he", "f=hello")
	})
	t.Run("atomic write", func(t *testing.T) {
		// Fully done: only the new content.
		got := plStatesAt(t, map[string]string{"f": "old"}, func(root string) {
			if err := fsq.WriteFile(filepath.Join(root, "f"), []byte("new")); err != nil {
				t.Fatal(err)
			}
		}, -1)
		plExpectStates(t, got, "f=new")
	})
	t.Run("atomic write before the dir fsync", func(t *testing.T) {
		// Old or new, never empty or torn; maybe a complete temp file.
		got := plStatesAt(t, map[string]string{"f": "old"}, func(root string) {
			if err := fsq.WriteFile(filepath.Join(root, "f"), []byte("new"), fsq.WithoutDirSync()); err != nil {
				t.Fatal(err)
			}
		}, -1)
		plExpectStates(t, got, ".tmp=new f=old", "f=new", "f=old")
	})
	t.Run("rename is atomic and needs the destination fsync", func(t *testing.T) {
		setup := map[string]string{"a/x": "job", "b/": ""}
		mv := func(root string) {
			if err := fsq.Rename(filepath.Join(root, "a/x"), filepath.Join(root, "b/x")); err != nil {
				t.Fatal(err)
			}
		}
		// Before any fsync: the old or the new place, never both nor
		// neither.
		plExpectStates(t, plStatesAt(t, setup, mv, 1), "a/ a/x=job b/", "a/ b/ b/x=job")
		// After the destination's fsync: the new place only.
		plExpectStates(t, plStatesAt(t, setup, mv, 2), "a/ b/ b/x=job")
	})
	t.Run("lock is never fsynced", func(t *testing.T) {
		got := plStatesAt(t, map[string]string{"q/": ""}, func(root string) {
			if err := fsq.TryLock(filepath.Join(root, "q/j.lock"), []byte("owner")); err != nil {
				t.Fatal(err)
			}
		}, -1)
		plExpectStates(t, got, "q/", "q/ q/j.lock/", "q/ q/j.lock/ q/j.lock/owner=", "q/ q/j.lock/ q/j.lock/owner=ow", "q/ q/j.lock/ q/j.lock/owner=owner")
	})
	t.Run("mkdir behind pkg/fsq's back is seen", func(t *testing.T) {
		got := plStatesAt(t, nil, func(root string) {
			if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := fsq.CreateFile(filepath.Join(root, "d/f"), []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := fsq.SyncDir(filepath.Join(root, "d")); err != nil {
				t.Fatal(err)
			}
		}, -1)
		plExpectStates(t, got, "", "d/ d/f=x")
	})
}
