package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// startGroup starts sh as the leader of a process group of its own,
// running script.
func startGroup(t *testing.T, script string) (*exec.Cmd, Identity) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	id, err := Of(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, id
}

func waitGroup(t *testing.T, id Identity, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive, err := GroupAlive(id)
		if err != nil {
			t.Fatal(err)
		}
		if alive == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GroupAlive(%d) stayed %v", id.PID, alive)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A group is alive while its leader runs, and while a child it left
// behind runs after the leader is gone; it is gone once both are.
func TestGroupAliveFollowsLeftoverChildren(t *testing.T) {
	t.Parallel()
	started := filepath.Join(t.TempDir(), "child")
	cmd, id := startGroup(t, "sleep 600 & echo $! > "+started+"; exec sleep 600")
	waitGroup(t, id, true)
	// The child must exist before the leader is killed (a loaded machine
	// may not have run the shell's fork yet).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(started); err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the leader never started its child")
		}
	}
	// Kill the leader only: its child lives on in the group.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if alive, err := GroupAlive(id); err != nil || !alive {
		t.Fatalf("leader gone, child left: GroupAlive = %v, %v; want alive", alive, err)
	}
	if err := syscall.Kill(-id.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGroup(t, id, false)
}

// Zombies do not count: a group whose only member has exited (not reaped
// yet) is gone.
func TestGroupAliveIgnoresZombies(t *testing.T) {
	t.Parallel()
	_, id := startGroup(t, "exit 0")
	waitGroup(t, id, false)
}

// A recorded leader whose pid now names another process (another start
// time) led a group that is gone; another boot's group is gone too.
func TestGroupAliveOtherProcessOrBoot(t *testing.T) {
	t.Parallel()
	_, id := startGroup(t, "exec sleep 600")
	waitGroup(t, id, true)
	reused := id
	reused.StartTime++
	if alive, _ := GroupAlive(reused); alive {
		t.Error("a group whose leader pid belongs to another process is reported alive")
	}
	other := id
	other.BootID = "00000000-0000-0000-0000-000000000000"
	if alive, _ := GroupAlive(other); alive {
		t.Error("a group of another boot is reported alive")
	}
	if MachineID() == "" {
		return // no machine id here: the other-machine case is TestCheckHostIdentity's
	}
	elsewhere := id
	elsewhere.MachineID = "0123456789abcdef0123456789abcdef"
	elsewhere.BootID = "00000000-0000-0000-0000-000000000000"
	if alive, err := GroupAlive(elsewhere); !alive || err == nil {
		t.Errorf("a group on another machine: %v, %v; want alive with an error (not ours to judge)", alive, err)
	}
	renamed := id
	renamed.Hostname = "renamed.invalid" // display only
	if alive, err := GroupAlive(renamed); !alive || err != nil {
		t.Errorf("a group under another hostname, same machine: %v, %v; want alive", alive, err)
	}
	if alive, _ := GroupAlive(Identity{PID: 0}); alive {
		t.Error("no pid: alive")
	}
}

// WithEnv finds a process by an entry of its environment, and not once it
// has exited.
func TestWithEnv(t *testing.T) {
	t.Parallel()
	marker := "FARRO_PROC_TEST=" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cmd := exec.Command("sleep", "600")
	cmd.Env = append(os.Environ(), marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	match := func(kv []byte) bool { return string(kv) == marker }
	pids, err := WithEnv(match)
	if err != nil || len(pids) != 1 || pids[0] != cmd.Process.Pid {
		t.Fatalf("WithEnv = %v, %v; want [%d]", pids, err, cmd.Process.Pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if pids, _ := WithEnv(match); len(pids) != 0 {
		t.Fatalf("WithEnv after exit = %v", pids)
	}
}
