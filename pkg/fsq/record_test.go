package fsq_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// The recorder sees every step of an atomic write, in order, with its data.
func TestRecorderSeesTheStepsOfWriteFile(t *testing.T) {
	dir := t.TempDir()
	var got []fsq.Rec
	fsq.SetRecorder(func(r fsq.Rec) { got = append(got, r) })
	defer fsq.SetRecorder(nil)
	p := filepath.Join(dir, "f")
	if err := fsq.WriteFile(p, []byte("data")); err != nil {
		t.Fatal(err)
	}
	fsq.SetRecorder(nil)
	want := []fsq.RecOp{fsq.RecBefore, fsq.RecCreate, fsq.RecWrite, fsq.RecFsync, fsq.RecRename, fsq.RecBefore, fsq.RecSyncDir}
	if len(got) != len(want) {
		t.Fatalf("records %+v, want ops %v", got, want)
	}
	for i, r := range got {
		if r.Op != want[i] {
			t.Fatalf("record %d is %s, want %s (%+v)", i, r.Op, want[i], got)
		}
	}
	tmp := got[1].Path
	if target, ok := fsq.TempTarget(filepath.Base(tmp)); !ok || target != "f" || filepath.Dir(tmp) != dir {
		t.Errorf("temp file %s: target %q %v", tmp, target, ok)
	}
	if string(got[2].Data) != "data" || got[4].Path != tmp || got[4].Path2 != p || got[6].Path != dir {
		t.Errorf("records %+v", got)
	}
}

func TestTempTarget(t *testing.T) {
	for name, want := range map[string]string{
		".job.json123": "job.json", ".x.quarantine.json9": "x.quarantine.json",
		"job.json123": "", ".job.json": "", ".123": "", ".": "",
	} {
		got, ok := fsq.TempTarget(name)
		if ok != (want != "") || got != want {
			t.Errorf("TempTarget(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

func TestSweepTemps(t *testing.T) {
	dir := t.TempDir()
	files := map[string]bool{ // name -> should survive
		".job.json1": false, ".job.json2": true /* young */, ".other1": true, "job.json": true,
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if name != ".job.json2" {
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	dirTime := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	if err := os.Chtimes(dir, dirTime, dirTime); err != nil {
		t.Fatal(err)
	}
	n, err := fsq.SweepTemps(dir, time.Minute, func(t string) bool { return t == "job.json" })
	if err != nil || n != 1 {
		t.Fatalf("SweepTemps: %d, %v; want 1 removed", n, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.ModTime().Equal(dirTime) {
		t.Errorf("directory mtime changed by the sweep: %v, %v", fi.ModTime(), err)
	}
	for name, survive := range files {
		if _, err := os.Lstat(filepath.Join(dir, name)); (err == nil) != survive {
			t.Errorf("%s: exists=%v, want %v", name, err == nil, survive)
		}
	}
	if n, err := fsq.SweepTemps(filepath.Join(dir, "missing"), 0, func(string) bool { return true }); n != 0 || err != nil {
		t.Errorf("SweepTemps of a missing dir: %d, %v", n, err)
	}
}
