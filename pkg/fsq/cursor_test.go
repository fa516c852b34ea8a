package fsq_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"github.com/farro-dev/farro/pkg/fsq"
)

// A lap is read in batches of at most n names, sees every entry once,
// classifies like ScanDir, and the next call starts a new lap.
func TestDirCursorReadsLapsInBatches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 10 {
		if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("j%02d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".tmp"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := fsq.NewDirCursor(dir)
	defer c.Close()
	for lap := range 2 {
		var dirs, hostile []string
		calls := 0
		for {
			ents, end, err := c.Next(3)
			if err != nil {
				t.Fatal(err)
			}
			calls++
			if n := len(ents.Dirs) + len(ents.Hostile); n > 3 {
				t.Fatalf("lap %d: batch of %d names, want at most 3", lap, n)
			}
			dirs = append(dirs, ents.Dirs...)
			hostile = append(hostile, ents.Hostile...)
			if end {
				break
			}
			if calls > 10 {
				t.Fatal("lap never ends")
			}
		}
		sort.Strings(dirs)
		sort.Strings(hostile)
		if len(dirs) != 10 || dirs[0] != "j00" || dirs[9] != "j09" || fmt.Sprint(hostile) != "[fifo link]" {
			t.Fatalf("lap %d: dirs %v hostile %v", lap, dirs, hostile)
		}
		if calls < 4 {
			t.Fatalf("lap %d took %d calls, want at least 4 for 12 names by 3", lap, calls)
		}
	}
}

func TestDirCursorMissingDirIsAnEmptyLap(t *testing.T) {
	t.Parallel()
	ents, end, err := fsq.NewDirCursor(filepath.Join(t.TempDir(), "nope")).Next(5)
	if err != nil || !end || len(ents.Dirs)+len(ents.Hostile) != 0 {
		t.Fatalf("got %+v end %v err %v; want an empty, ended lap", ents, end, err)
	}
}
