package watchdog

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// A power cut after a claim commonly leaves the lock's owner file (never
// fsynced) empty or torn: such a lock, past the grace period, belongs to a
// dead holder and its job is recovered. (It used to be skipped forever:
// the "changed hands" re-check compared a parse error with a read.)
func TestEmptyOrTornOwnerFileIsRecovered(t *testing.T) {
	t.Parallel()
	for name, content := range map[string]string{"empty": "", "torn": `{"hostname":"h","pi`} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, Config{LockGrace: 5 * time.Second})
			e.claim(t, "j")
			lock := e.s.LockPath("j")
			if err := os.WriteFile(filepath.Join(lock, fsq.OwnerFile), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			e.after(t, time.Minute)
			if st, _ := e.where(t, "j"); st != job.Stale {
				t.Fatalf("state %s, want stale", st)
			}
			if e.locked("j") {
				t.Fatal("lock left behind")
			}
		})
	}
}

// The startup pass removes the temp files of atomic writes whose writer
// died (a power cut between creating and renaming them), and only those.
func TestStartupRemovesLeftoverTempFiles(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{LockGrace: 5 * time.Second})
	if _, err := e.s.Submit(job.SubmitRequest{ID: "j", Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	dir := e.s.JobDir(job.Queued, "", "j")
	old := filepath.Join(dir, ".job.json123456")
	young := filepath.Join(dir, ".job.json654321")
	mine := filepath.Join(dir, ".handler-cache1")
	note := e.s.Path(job.CorruptDir, ".x.20260101T000000.000000Z.quarantine.json42")
	for _, p := range []string{old, young, mine, note} {
		if err := os.WriteFile(p, []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{old, mine, note} {
		age(t, p, time.Minute)
	}
	e.runOnce(t)
	for p, want := range map[string]bool{old: false, young: true, mine: true, note: false} {
		if _, err := os.Lstat(p); (err == nil) != want {
			t.Errorf("%s: exists=%v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}
