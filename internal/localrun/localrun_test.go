package localrun

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/proc"
)

// A record is written, listed and removed; a hostile entry (a FIFO, a
// record under another file's name) is listed with its error instead of
// blocking or being believed.
func TestRecords(t *testing.T) {
	t.Parallel()
	local := t.TempDir()
	r := Record{JobID: "job-1", Agent: "w1", ClaimToken: "abc", Attempt: 2, LeaseMS: 30000, Handler: proc.Identity{PID: 42}, Started: time.Now().UTC()}
	if err := Write(local, r); err != nil {
		t.Fatal(err)
	}
	if err := Write(local, Record{JobID: "../x", Agent: "w1"}); err == nil {
		t.Error("a record for an invalid job id was written")
	}
	dir := filepath.Join(local, Dir)
	if err := syscall.Mkfifo(filepath.Join(dir, "w1.fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "w1.job-1.abc.json"))
	if err := os.WriteFile(filepath.Join(dir, "w2.job-9.abc.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	ents, err := List(local)
	if err != nil || len(ents) != 3 {
		t.Fatalf("List: %v %v", ents, err)
	}
	for _, e := range ents {
		switch filepath.Base(e.Path) {
		case "w1.job-1.abc.json":
			if e.Err != nil || e.Record.ClaimToken != "abc" || e.Record.Lease() != 30*time.Second || e.Record.Handler.PID != 42 {
				t.Errorf("record: %+v", e)
			}
		default:
			if e.Err == nil {
				t.Errorf("%s listed without an error", e.Path)
			}
		}
	}
	if err := Remove(local, "w1", "job-1", "abc"); err != nil {
		t.Fatal(err)
	}
	if err := Remove(local, "w1", "job-1", "abc"); err != nil {
		t.Errorf("removing a removed record: %v", err)
	}
	if err := Write(local, Record{JobID: "job-1", Agent: "w1", ClaimToken: "../x"}); err == nil {
		t.Error("a record for an invalid claim token was written")
	}
}

// Two claims of one job on one agent (a fenced attempt whose commit runs
// behind the slot while the job's next claim starts its handler) each
// have their record: removing the old claim's, late, leaves the new
// one's for watchdogd to see.
func TestRecordsOfTwoClaimsOfOneJob(t *testing.T) {
	t.Parallel()
	local := t.TempDir()
	old := Record{JobID: "job-1", Agent: "w1", ClaimToken: "aaaa", Attempt: 2, LeaseMS: 2000, Handler: proc.Identity{PID: 41}}
	cur := Record{JobID: "job-1", Agent: "w1", ClaimToken: "bbbb", Attempt: 3, LeaseMS: 2000, Handler: proc.Identity{PID: 42}}
	for _, r := range []Record{old, cur} {
		if err := Write(local, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := Remove(local, old.Agent, old.JobID, old.ClaimToken); err != nil {
		t.Fatal(err)
	}
	ents, err := List(local)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Err != nil || ents[0].Record.ClaimToken != "bbbb" || ents[0].Record.Handler.PID != 42 {
		t.Fatalf("after the old claim's record was removed: %+v, want the new claim's alone", ents)
	}
}

// WriteFile replaces a symlink at its path (a handler may leave one in
// its working directory) instead of writing through it, and leaves no
// temporary file.
func TestWriteFileReplacesSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "prompt.json")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("written through the symlink: target holds %q", b)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Fatalf("path: %v %v, want a regular file, 0644", fi, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("left in the directory: %v", ents)
	}
}
