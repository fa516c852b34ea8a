package crash

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// livenessCase is a running job whose lock names a crafted owner, and
// whether watchdogd must recover it (owner proven dead) or leave it alone.
type livenessCase struct {
	id      string
	owner   func(t *testing.T) *proc.Identity // nil: no owner file
	lockAge time.Duration                     // backdates the lock directory
	mode    os.FileMode                       // of the owner file (0: 0644)
	recover bool
}

// plantHeld makes job id run under agent "ghost": claimed for real (the
// test process holds it), then the lock's owner file is replaced by one
// naming who, or removed. The job's heartbeat is fresh; watchdogd runs
// with a crash threshold of an hour, so only the liveness of the owner is
// judged.
func plantHeld(t *testing.T, c *cluster, lc livenessCase) {
	t.Helper()
	c.ledger.attempt(lc.id)
	if _, err := c.spool.Submit(job.SubmitRequest{ID: lc.id, Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	c.ledger.ack(lc.id)
	if _, err := c.spool.Claim(lc.id, job.Holder{Actor: "agentd/ghost", Agent: "ghost"}); err != nil {
		t.Fatal(err)
	}
	lock := c.spool.LockPath(lc.id)
	ownerPath := filepath.Join(lock, fsq.OwnerFile)
	raw, err := fsq.ReadOwner(lock)
	if err != nil {
		t.Fatal(err)
	}
	o, err := job.ParseOwner(raw)
	if err != nil {
		t.Fatal(err)
	}
	if lc.owner == nil {
		if err := os.Remove(ownerPath); err != nil {
			t.Fatal(err)
		}
	} else {
		o.Identity = *lc.owner(t)
		b, _ := json.Marshal(o)
		mode := lc.mode
		if mode == 0 {
			mode = 0o644
		}
		if err := os.WriteFile(ownerPath, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(ownerPath, mode); err != nil {
			t.Fatal(err)
		}
	}
	if lc.lockAge > 0 {
		old := time.Now().Add(-lc.lockAge)
		if err := os.Chtimes(lock, old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// liveChild starts a long sleep (killed at cleanup) and returns its
// identity.
func liveChild(t *testing.T) *proc.Identity {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	id, err := proc.Of(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return &id
}

// goneProcess returns the identity of a process that has exited and been
// reaped.
func goneProcess(t *testing.T) *proc.Identity {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id, err := proc.Of(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return &id
}

// zombie returns the identity of a child that has exited but is not
// reaped until cleanup.
func zombie(t *testing.T) *proc.Identity {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	id, err := proc.Of(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !waitUntil(10*time.Second, func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(id.PID) + "/stat")
		return err == nil && stateOf(b) == 'Z'
	}) {
		t.Fatal("child never became a zombie")
	}
	return &id
}

func stateOf(stat []byte) byte {
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' && i+2 < len(stat) {
			return stat[i+2]
		}
	}
	return 0
}

// runLiveness plants the cases, runs watchdogd (wrapped, if wrap is set)
// until every case to recover is in stale/ without its lock, then checks
// for two more seconds that the others are untouched.
func runLiveness(t *testing.T, c *cluster, wrap []string, cases []livenessCase) {
	t.Helper()
	for _, lc := range cases {
		plantHeld(t, c, lc)
	}
	if wrap != nil {
		// The wrapped watchdogd runs as nobody: let it work on the spool.
		if err := os.Chmod(c.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = filepath.Walk(c.spoolDir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Name() != fsq.OwnerFile {
				_ = os.Chmod(p, fi.Mode().Perm()|0o777)
			}
			return nil
		})
	}
	// The grace is far longer than the test, so that the fresh ownerless
	// lock stays fresh however loaded the machine is.
	c.startWrapped("watchdogd", "watchdogd", wrap, "--interval", "50ms", "--lock-grace", "60s", "--crash-threshold", "1h", "--rescan", "1s")
	recovered := func(id string) bool {
		st, _ := c.state(id)
		_, err := os.Lstat(c.spool.LockPath(id))
		return st == job.Stale && os.IsNotExist(err)
	}
	ok := waitUntil(30*time.Second, func() bool {
		for _, lc := range cases {
			if lc.recover && !recovered(lc.id) {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second) // dozens of watchdog intervals
	c.stopAll()
	for _, lc := range cases {
		st, agent := c.state(lc.id)
		_, lerr := os.Lstat(c.spool.LockPath(lc.id))
		switch {
		case lc.recover && !recovered(lc.id):
			t.Errorf("%s: owner is dead but the job was not recovered (in %s, lock: %v; all recovered in time: %v)", lc.id, st, lerr, ok)
		case !lc.recover && (st != job.InProgress || agent != "ghost" || lerr != nil):
			t.Errorf("%s: owner may be alive but the job was recovered (in %s, lock: %v)", lc.id, st, lerr)
		}
	}
}

// TestLockOwnerLiveness runs watchdogd on locks whose owner file names a
// live process (the test itself, a child), a live process with another
// start time (pid reused), another boot, a zombie, a reaped process,
// another machine (machine id), another hostname on this machine (display
// only: judged as usual), an old-format owner (no machine id) of another
// boot under another hostname (audit F4), and no owner file before and
// after the grace period. The dead ones are recovered; a live owner, an
// owner watchdogd cannot judge and a fresh ownerless lock are never
// touched.
func TestLockOwnerLiveness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs watchdogd; skipped with -short")
	}
	t.Parallel()
	c := newCluster(t, binaries(t))
	self := func(*testing.T) *proc.Identity { id := proc.Self(); return &id }
	runLiveness(t, c, nil, []livenessCase{
		{id: "live-self", owner: self},
		{id: "live-child", owner: liveChild},
		{id: "other-machine", owner: func(t *testing.T) *proc.Identity {
			id := goneProcess(t)
			id.Hostname = "elsewhere.invalid"
			id.MachineID = "0123456789abcdef0123456789abcdef"
			if id.MachineID == proc.MachineID() {
				id.MachineID = "fedcba9876543210fedcba9876543210"
			}
			return id
		}},
		{id: "renamed-host-live", owner: func(t *testing.T) *proc.Identity {
			id := liveChild(t)
			id.Hostname = "old-name.invalid"
			return id
		}},
		{id: "renamed-host-gone", recover: true, owner: func(t *testing.T) *proc.Identity {
			id := goneProcess(t)
			id.Hostname = "old-name.invalid"
			return id
		}},
		{id: "old-format-other-boot", recover: true, owner: func(t *testing.T) *proc.Identity {
			id := liveChild(t)
			id.Hostname = "old-name.invalid"
			id.MachineID = ""
			id.BootID = "00000000-0000-0000-0000-000000000000"
			return id
		}},
		{id: "no-owner-fresh"},
		{id: "pid-reused", recover: true, owner: func(t *testing.T) *proc.Identity {
			id := liveChild(t)
			id.StartTime++
			return id
		}},
		{id: "other-boot", recover: true, owner: func(t *testing.T) *proc.Identity {
			id := liveChild(t)
			id.BootID = "00000000-0000-0000-0000-000000000000"
			return id
		}},
		{id: "zombie", recover: true, owner: zombie},
		{id: "pid-gone", recover: true, owner: goneProcess},
		{id: "no-owner-old", recover: true, lockAge: time.Hour},
	})
}

// TestLivenessCheckErrorMeansAlive runs watchdogd unprivileged (nobody)
// with /proc mounted hidepid=2 in a private mount namespace: it cannot see
// the test's processes, and kill(pid, 0) answers EPERM instead of ESRCH.
// A live owner it cannot check, and an owner file it may not read, must
// both count as alive; a reaped owner (ESRCH: proven gone) is still
// recovered. It needs root, unshare(1) and setpriv(1), and is skipped
// without them.
func TestLivenessCheckErrorMeansAlive(t *testing.T) {
	if testing.Short() {
		t.Skip("runs watchdogd; skipped with -short")
	}
	if os.Getuid() != 0 {
		t.Skip("needs root (a private /proc mount and setpriv)")
	}
	for _, tool := range []string{"unshare", "setpriv", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	probe := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", "mount -t proc -o hidepid=2 proc /proc")
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("cannot mount a hidepid /proc in a mount namespace here: %v %s", err, out)
	}
	t.Parallel()
	c := newCluster(t, binaries(t))
	wrap := []string{"unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount -t proc -o hidepid=2 proc /proc && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"`, "sh"}
	runLiveness(t, c, wrap, []livenessCase{
		{id: "hidden-live", owner: liveChild},
		{id: "unreadable-owner", owner: liveChild, mode: 0o600, lockAge: time.Hour},
		{id: "hidden-gone", recover: true, owner: goneProcess},
	})
}
