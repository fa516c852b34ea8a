package ctl_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/internal/proc/proctest"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

func TestFsckCleanSpool(t *testing.T) {
	e := mixed(t)
	// Fresh leftovers are within the grace: possibly in use, not reported.
	if err := os.Mkdir(e.s.Path("tmp", "new.1234"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl("").Fsck(ctl.FsckOptions{Grace: ctl.DefaultGrace}); err != nil {
		t.Fatalf("%v\n%s", err, e.stdout)
	}
	if strings.TrimSpace(e.stdout.String()) != "fsck: clean" {
		t.Fatalf("stdout %q", e.stdout)
	}
}

// broken plants one of each problem fsck must find.
func broken(t *testing.T) *env {
	e := newEnv(t)
	e.submit("fine", nil)

	// orphan-lock: a job running under an agent that died (reaped pid).
	e.claim("orphan")
	lock := e.s.LockPath("orphan")
	writeFile(t, filepath.Join(lock, fsq.OwnerFile), string(deadOwner(t, "agentd/t1", "t1")))

	// orphan-lock without an owner file, older than the grace, on a
	// queued job (a claim that died between mkdir and the owner write).
	e.submit("noowner", nil)
	if err := os.Mkdir(e.s.LockPath("noowner"), 0o755); err != nil {
		t.Fatal(err)
	}
	age(t, e.s.LockPath("noowner"), time.Hour)

	// unreadable: a truncated job.json.
	e.submit("corrupt", func(r *job.SubmitRequest) { r.Held = true })
	writeFile(t, e.s.Path("held", "corrupt", job.JobFile), `{"schema_version":"1.0.0","id":"corr`)

	// hostile: a symlink planted as a job.
	if err := os.Symlink("/etc", e.s.Path("deferred", "evil")); err != nil {
		t.Fatal(err)
	}

	// duplicate: one job in incoming/ and in held/.
	e.submit("dup", nil)
	if out, err := exec.Command("cp", "-a", e.s.Path("incoming", "dup"), e.s.Path("held", "dup")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}

	// tmp leftover of a submit that died.
	leftover := e.s.Path("tmp", "lost.0a1b2c3d")
	writeFile(t, filepath.Join(leftover, job.PromptFile), "{}")
	age(t, leftover, time.Hour)

	// stray temp file of an interrupted atomic write.
	stray := e.s.Path("incoming", "fine", ".job.json123456789")
	writeFile(t, stray, "{")
	age(t, stray, time.Hour)

	// unknown schema version.
	e.submit("future", nil)
	p := e.s.Path("incoming", "future", job.JobFile)
	b, _ := os.ReadFile(p)
	writeFile(t, p, strings.Replace(string(b), `"1.0.0"`, `"9.0.0"`, 1))

	// status-mismatch: job.json says queued in held/ (a Move that died
	// between its rename and... or a power cut).
	e.submit("mismatch", func(r *job.SubmitRequest) { r.Held = true })
	p = e.s.Path("held", "mismatch", job.JobFile)
	b, _ = os.ReadFile(p)
	writeFile(t, p, strings.Replace(string(b), `"status": "held"`, `"status": "queued"`, 1))

	// a control request that reached a job as it was finishing.
	e.failed("latectl")
	writeFile(t, e.s.Path("completed", "failed", "latectl", job.ControlFile), `{"action":"hold","actor":"farroctl","reason":"","requested_at":"2026-01-01T00:00:00Z"}`)

	// in-progress without its lock.
	e.claim("nolock")
	if err := fsq.Unlock(e.s.LockPath("nolock")); err != nil {
		t.Fatal(err)
	}
	return e
}

func findings(t *testing.T, out string) []ctl.Finding {
	t.Helper()
	var fs []ctl.Finding
	for _, l := range lines(out) {
		var f ctl.Finding
		if err := json.Unmarshal([]byte(l), &f); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		fs = append(fs, f)
	}
	return fs
}

func kinds(fs []ctl.Finding) map[string]string {
	m := map[string]string{}
	for _, f := range fs {
		key := f.ID
		if key == "" {
			key = f.Path
		}
		m[key] = f.Kind
	}
	return m
}

func TestFsckFindsWithoutChanging(t *testing.T) {
	e := broken(t)
	before := tree(t, e.s.Root)
	err := e.ctl("").Fsck(ctl.FsckOptions{JSON: true, Grace: ctl.DefaultGrace})
	if ctl.ExitCode(err) != ctl.ExitFail {
		t.Fatalf("exit %d: %v", ctl.ExitCode(err), err)
	}
	got := kinds(findings(t, e.stdout.String()))
	want := map[string]string{
		"orphan":                           ctl.FindOrphanLock,
		"noowner":                          ctl.FindOrphanLock,
		"corrupt":                          ctl.FindUnreadable,
		"deferred/evil":                    ctl.FindHostile,
		"dup":                              ctl.FindDuplicate,
		"tmp/lost.0a1b2c3d":                ctl.FindTmpLeftover,
		"incoming/fine/.job.json123456789": ctl.FindStrayTemp,
		"future":                           ctl.FindUnknownSchema,
		"mismatch":                         ctl.FindStatusMismatch,
		"nolock":                           ctl.FindUnlocked,
		"latectl":                          ctl.FindStaleControl,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("findings %v", got)
	}
	if after := tree(t, e.s.Root); after != before {
		t.Fatalf("fsck without --repair changed the spool:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// The text plan: one line per finding, then the summary as the error.
	err = e.ctl("").Fsck(ctl.FsckOptions{Grace: ctl.DefaultGrace})
	if ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(err.Error(), "nothing changed") {
		t.Fatalf("%v", err)
	}
	if n := len(lines(e.stdout.String())); n != len(want) {
		t.Fatalf("%d plan lines:\n%s", n, e.stdout)
	}
	if !strings.Contains(e.stdout.String(), "report only") {
		t.Error("duplicate not marked report only")
	}
	if after := tree(t, e.s.Root); after != before {
		t.Fatal("text fsck changed the spool")
	}
}

func TestFsckRepair(t *testing.T) {
	e := broken(t)
	err := e.ctl("").Fsck(ctl.FsckOptions{Repair: true, JSON: true, Grace: ctl.DefaultGrace})
	// The duplicate and the unknown schema are only reported: exit 1.
	if ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(err.Error(), "2 of 11") {
		t.Fatalf("exit %d: %v\n%s", ctl.ExitCode(err), err, e.stdout)
	}
	for _, f := range findings(t, e.stdout.String()) {
		reportOnly := f.Kind == ctl.FindDuplicate || f.Kind == ctl.FindUnknownSchema
		if f.Repaired == reportOnly {
			t.Errorf("%s %s%s: repaired=%v (%s)", f.Kind, f.ID, f.Path, f.Repaired, f.Result)
		}
	}

	// orphan: its dead agent's job is stale now, the lock gone.
	if j := e.read("orphan"); j.Status != job.Stale {
		t.Errorf("orphan: %s", j.Status)
	}
	for _, id := range []string{"orphan", "noowner", "nolock", "mismatch"} {
		if _, err := os.Lstat(e.s.LockPath(id)); !os.IsNotExist(err) {
			t.Errorf("%s: lock left: %v", id, err)
		}
	}
	if j := e.read("noowner"); j.Status != job.Queued {
		t.Errorf("noowner: %s", j.Status)
	}
	if j := e.read("nolock"); j.Status != job.Stale {
		t.Errorf("nolock: %s", j.Status)
	}
	if j := e.read("mismatch"); j.Status != job.Queued {
		t.Errorf("mismatch: %s (rolled forward to its status)", j.Status)
	}
	if _, err := e.s.Locate("corrupt"); err == nil {
		t.Error("corrupt job still in a state directory")
	}
	q, _ := filepath.Glob(e.s.Path("corrupt", "*"))
	var corrupt, evil int
	for _, p := range q {
		switch {
		case strings.HasSuffix(p, ".quarantine.json"):
		case strings.HasPrefix(filepath.Base(p), "corrupt."):
			corrupt++
		case strings.HasPrefix(filepath.Base(p), "evil."):
			evil++
		}
	}
	if corrupt != 1 || evil != 1 {
		t.Errorf("corrupt/: %v", q)
	}
	for _, p := range []string{"tmp/lost.0a1b2c3d", "incoming/fine/.job.json123456789", "deferred/evil"} {
		if _, err := os.Lstat(e.s.Path(p)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	// The duplicate is untouched; the fine job is fine.
	if locs, _ := e.s.Locate("dup"); len(locs) != 2 {
		t.Errorf("dup: %v", locs)
	}
	e.read("fine")
	if c, err := job.ReadControl(e.where("latectl").Dir); c != nil || err != nil {
		t.Errorf("latectl: control %v %v", c, err)
	}

	// A second pass finds only what fsck never repairs.
	err = e.ctl("").Fsck(ctl.FsckOptions{Repair: true, JSON: true, Grace: ctl.DefaultGrace})
	got := kinds(findings(t, e.stdout.String()))
	if len(got) != 2 || got["dup"] != ctl.FindDuplicate || got["future"] != ctl.FindUnknownSchema || ctl.ExitCode(err) != ctl.ExitFail {
		t.Fatalf("second pass: %v %v", got, err)
	}

	// Once the operator resolves them, fsck is clean.
	if err := os.RemoveAll(e.s.Path("held", "dup")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(e.s.Path("incoming", "future")); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl("").Fsck(ctl.FsckOptions{Repair: true}); err != nil {
		t.Fatalf("%v\n%s", err, e.stdout)
	}
}

func TestFsckRepairAllExitsZero(t *testing.T) {
	e := newEnv(t)
	e.submit("q", nil)
	leftover := e.s.Path("tmp", "lost.1")
	if err := os.Mkdir(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	age(t, leftover, time.Hour)
	if err := e.ctl("").Fsck(ctl.FsckOptions{Repair: true, Grace: time.Minute}); err != nil {
		t.Fatalf("%v\n%s", err, e.stdout)
	}
	if !strings.Contains(e.stdout.String(), "all repaired") || !strings.Contains(e.stdout.String(), "removed") {
		t.Fatalf("stdout %q", e.stdout)
	}
}

func TestFsckLeavesLiveLocksAlone(t *testing.T) {
	e := newEnv(t)
	e.claim("run") // the test process is the live owner
	e.submit("q", nil)
	// A lock of a live owner (this process) with no job: reported only.
	owner, _ := json.Marshal(job.NewOwner("farroctl", ""))
	if err := fsq.TryLock(e.s.LockPath("ghost"), owner); err != nil {
		t.Fatal(err)
	}
	age(t, e.s.LockPath("ghost"), time.Hour)
	// A fresh ownerless lock: within the grace.
	if err := os.Mkdir(e.s.LockPath("q"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := tree(t, e.s.Root)
	err := e.ctl("").Fsck(ctl.FsckOptions{Repair: true, JSON: true, Grace: ctl.DefaultGrace})
	got := kinds(findings(t, e.stdout.String()))
	if len(got) != 1 || got["ghost"] != ctl.FindLockNoJob || ctl.ExitCode(err) != ctl.ExitFail {
		t.Fatalf("%v %v", got, err)
	}
	if after := tree(t, e.s.Root); after != before {
		t.Fatal("live locks touched")
	}
}

// fsck --repair of a dead agent's lock whose handler still runs: like
// watchdogd, it kills the handler and leaves the job where it is; only a
// later run, once the handler is gone, moves the job on.
func TestFsckRepairStopsTheHandlerFirst(t *testing.T) {
	e := newEnv(t)
	c := e.claim("run")
	hid, exited := proctest.Handler(t)
	if err := c.RecordHandler(hid); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(e.s.LockPath("run"), fsq.OwnerFile), string(deadOwner(t, "agentd/t1", "t1")))
	_ = e.ctl("").Fsck(ctl.FsckOptions{Grace: ctl.DefaultGrace, Repair: true})
	if loc := e.where("run"); loc.State != job.InProgress {
		t.Fatalf("fsck --repair moved the job to %s while its handler ran", loc.State)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("fsck --repair did not kill the handler")
	}
	e.stdout.Reset()
	if err := e.ctl("").Fsck(ctl.FsckOptions{Grace: ctl.DefaultGrace, Repair: true}); err != nil {
		t.Fatalf("second repair: %v\n%s", err, e.stdout)
	}
	if loc := e.where("run"); loc.State != job.Stale {
		t.Fatalf("after the handler is gone: %s, want stale", loc.State)
	}
}

// ownerFile returns an owner file for id (an old-format one when its
// MachineID is empty).
func ownerFile(t *testing.T, id proc.Identity) []byte {
	t.Helper()
	b, err := json.Marshal(job.Owner{Identity: id, Actor: "agentd/w1", Agent: "w1", Token: "feedface",
		AcquiredAt: time.Now().UTC().Add(-2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Audit F4: a lock from a previous boot under another hostname, in the
// old format (no machine id), is dead (other boot) and repaired; a lock
// held from another machine is reported as such, never "clean", and left
// alone.
func TestFsckHostIdentity(t *testing.T) {
	e := newEnv(t)
	e.submit("oldboot", nil)
	e.submit("peer", nil)
	old := ownerFile(t, proc.Identity{Hostname: "old-name", PID: 4242, BootID: "00000000-0000-0000-0000-000000000000"})
	if err := fsq.TryLock(e.s.LockPath("oldboot"), old); err != nil {
		t.Fatal(err)
	}
	age(t, e.s.LockPath("oldboot"), 2*time.Hour)
	mid := proc.MachineID()
	if mid == "" {
		t.Skip("no machine id on this host")
	}
	other := strings.Repeat("e", 32)
	if other == mid {
		other = strings.Repeat("f", 32)
	}
	foreign := ownerFile(t, proc.Identity{Hostname: "peer-host", MachineID: other, PID: 4242, BootID: "11111111-0000-0000-0000-000000000000"})
	if err := fsq.TryLock(e.s.LockPath("peer"), foreign); err != nil {
		t.Fatal(err)
	}
	age(t, e.s.LockPath("peer"), 2*time.Hour)

	err := e.ctl("").Fsck(ctl.FsckOptions{Grace: ctl.DefaultGrace})
	out := e.stdout.String()
	if ctl.ExitCode(err) != ctl.ExitFail || strings.Contains(out, "clean") {
		t.Fatalf("fsck: %v\n%s", err, out)
	}
	for _, want := range []string{
		ctl.FindOrphanLock + " ", "oldboot", "other boot",
		ctl.FindForeignLock + " ", "peer", "on another machine (host peer-host, machine id " + other + ")",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("fsck output lacks %q:\n%s", want, out)
		}
	}

	e.stdout.Reset()
	err = e.ctl("").Fsck(ctl.FsckOptions{Repair: true, JSON: true, Grace: ctl.DefaultGrace})
	fs := findings(t, e.stdout.String())
	got := kinds(fs)
	if got["oldboot"] != ctl.FindOrphanLock || got["peer"] != ctl.FindForeignLock || ctl.ExitCode(err) != ctl.ExitFail {
		t.Fatalf("repair: %v %v", got, err)
	}
	if _, err := os.Lstat(e.s.LockPath("oldboot")); !os.IsNotExist(err) {
		t.Errorf("the other boot's lock is still there: %v", err)
	}
	if b, err := fsq.ReadOwner(e.s.LockPath("peer")); err != nil || string(b) != string(foreign) {
		t.Errorf("the foreign lock was touched: %q %v", b, err)
	}
}

// A tmp/ build older than the grace whose submitter is alive (it holds
// the build's flock) is no leftover: fsck neither reports nor removes it;
// once the flock is gone (the submitter died) it is one.
func TestFsckLeavesALiveBuildAlone(t *testing.T) {
	e := newEnv(t)
	build := e.s.Path("tmp", "slow.0a1b2c3d")
	writeFile(t, filepath.Join(build, job.PromptFile), "{}")
	age(t, build, time.Hour)
	fd, err := unix.Open(build, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl("").Fsck(ctl.FsckOptions{Repair: true, Grace: time.Minute}); err != nil || strings.TrimSpace(e.stdout.String()) != "fsck: clean" {
		t.Fatalf("with the build held: %v, stdout %q", err, e.stdout)
	}
	if _, err := os.Stat(filepath.Join(build, job.PromptFile)); err != nil {
		t.Fatalf("the live build was touched: %v", err)
	}
	if err := unix.Flock(fd, unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl("").Fsck(ctl.FsckOptions{Repair: true, Grace: time.Minute}); err != nil || !strings.Contains(e.stdout.String(), "removed") {
		t.Fatalf("after its flock was released: %v, stdout %q", err, e.stdout)
	}
	if _, err := os.Lstat(build); !os.IsNotExist(err) {
		t.Fatalf("the dead build is still there: %v", err)
	}
}
