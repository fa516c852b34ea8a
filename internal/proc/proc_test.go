package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestSelf(t *testing.T) {
	t.Parallel()
	id := Self()
	if id.PID != os.Getpid() || id.StartTime == 0 || id.BootID == "" || id.Hostname == "" || id.MachineID != MachineID() {
		t.Fatalf("Self() = %+v", id)
	}
	if id != Self() {
		t.Fatal("Self() is not stable")
	}
	if v := Check(id); v != Alive || v.Dead() {
		t.Fatalf("Check(self) = %v, want alive", v)
	}
}

func TestCheckGone(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	st, err := readStat(pid) // may already be a zombie: it is not reaped yet
	if err != nil {
		t.Fatalf("stat of the unreaped child: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	id := Identity{Hostname: Self().Hostname, PID: pid, StartTime: st.startTime, BootID: BootID()}
	if v := Check(id); v != Gone || !v.Dead() {
		t.Fatalf("Check(reaped child) = %v, want %v", v, Gone)
	}
}

func TestCheckReused(t *testing.T) {
	t.Parallel()
	id := Self()
	id.StartTime++
	if v := Check(id); v != Reused || !v.Dead() {
		t.Fatalf("Check(other start time) = %v, want %v", v, Reused)
	}
}

func TestCheckOtherBoot(t *testing.T) {
	t.Parallel()
	id := Self()
	id.BootID = "00000000-0000-0000-0000-000000000000"
	if v := Check(id); v != OtherBoot || !v.Dead() {
		t.Fatalf("Check(other boot id) = %v, want %v", v, OtherBoot)
	}
}

// hostSources points the machine-id and boot-id sources at files holding
// machineID and bootID (a missing file when ""), for the rest of the test.
// Tests that call it must not be parallel: the sources are package state.
func hostSources(t *testing.T, machineID, bootID string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) []string {
		p := filepath.Join(dir, name)
		if content != "" {
			if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return []string{p}
	}
	oldM, oldB := machineIDFiles, bootIDFiles
	machineIDFiles, bootIDFiles = write("machine-id", machineID), write("boot_id", bootID)
	t.Cleanup(func() { machineIDFiles, bootIDFiles = oldM, oldB })
}

// The host is machine id plus boot id; the hostname is display only
// (audit F4: a lock from a previous boot under another hostname was
// judged alive forever).
func TestCheckHostIdentity(t *testing.T) {
	const (
		mine    = "11111111111111111111111111111111"
		theirs  = "22222222222222222222222222222222"
		bootNow = "aaaaaaaa-0000-0000-0000-000000000001"
		bootOld = "aaaaaaaa-0000-0000-0000-000000000002"
	)
	live := Self() // a live process (this one); Self is cached before the sources change
	hostSources(t, mine, bootNow)
	if MachineID() != mine || BootID() != bootNow {
		t.Fatalf("injected sources: machine %q boot %q", MachineID(), BootID())
	}
	for _, tc := range []struct {
		name string
		id   Identity
		want Verdict
	}{
		{"old owner file (no machine id), other hostname, other boot",
			Identity{Hostname: "old-name", PID: 4242, BootID: bootOld}, OtherBoot},
		{"same machine id, other hostname, other boot",
			Identity{Hostname: "old-name", MachineID: mine, PID: 4242, BootID: bootOld}, OtherBoot},
		{"other machine id",
			Identity{Hostname: "peer", MachineID: theirs, PID: 4242, BootID: bootOld}, Foreign},
		{"other machine id, same hostname",
			Identity{Hostname: live.Hostname, MachineID: theirs, PID: live.PID, StartTime: live.StartTime + 1, BootID: bootNow}, Foreign},
		{"same machine, other hostname, live process",
			Identity{Hostname: "renamed", MachineID: mine, PID: live.PID, StartTime: live.StartTime, BootID: bootNow}, Alive},
		{"same machine, same boot, pid reused",
			Identity{Hostname: "renamed", MachineID: mine, PID: live.PID, StartTime: live.StartTime + 1, BootID: bootNow}, Reused},
	} {
		if v := Check(tc.id); v != tc.want {
			t.Errorf("%s: Check = %v, want %v", tc.name, v, tc.want)
		}
	}
	if Foreign.Dead() {
		t.Error("Foreign is dead; an owner on another machine is not ours to judge")
	}

	// This host has no machine id: the boot id decides alone.
	hostSources(t, "", bootNow)
	if v := Check(Identity{Hostname: "x", MachineID: theirs, PID: 4242, BootID: bootOld}); v != OtherBoot {
		t.Errorf("no local machine id, other boot: Check = %v, want %v", v, OtherBoot)
	}
}

// Same machine, same boot, a pid that is gone: Gone, whatever the
// hostname says.
func TestCheckGoneSameMachine(t *testing.T) {
	const mine = "11111111111111111111111111111111"
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	st, err := readStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	boot, host0 := BootID(), Self().Hostname
	hostSources(t, mine, boot)
	for _, host := range []string{host0, "renamed"} {
		id := Identity{Hostname: host, MachineID: mine, PID: pid, StartTime: st.startTime, BootID: boot}
		if v := Check(id); v != Gone || !v.Dead() {
			t.Errorf("hostname %s: Check(reaped child) = %v, want %v", host, v, Gone)
		}
	}
}

// A machine id file that is missing or empty falls back to the next.
func TestMachineIDFallback(t *testing.T) {
	dir := t.TempDir()
	empty, dbus := filepath.Join(dir, "etc-machine-id"), filepath.Join(dir, "dbus-machine-id")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dbus, []byte("33333333333333333333333333333333\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := machineIDFiles
	t.Cleanup(func() { machineIDFiles = old })
	machineIDFiles = []string{filepath.Join(dir, "missing"), empty, dbus}
	if got := MachineID(); got != "33333333333333333333333333333333" {
		t.Fatalf("MachineID = %q", got)
	}
	machineIDFiles = []string{filepath.Join(dir, "missing")}
	if got := MachineID(); got != "" {
		t.Fatalf("MachineID with no file = %q", got)
	}
}

func TestCheckUncertainIsAlive(t *testing.T) {
	t.Parallel()
	for name, id := range map[string]Identity{
		"no pid": {},
		"pid 1":  {PID: 1}, // exists; no start time to compare
	} {
		if v := Check(id); v != Alive {
			t.Errorf("%s: Check = %v, want alive", name, v)
		}
	}
}

func TestCheckZombie(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "exit 0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			_ = cmd.Wait()
		}
	})
	pid := cmd.Process.Pid
	var st stat
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		st, err = readStat(pid)
		if err != nil {
			t.Fatalf("stat: %v", err)
		}
		if st.state == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d never became a zombie (state %c)", pid, st.state)
		}
		time.Sleep(time.Millisecond)
	}
	id := Identity{Hostname: Self().Hostname, PID: pid, StartTime: st.startTime, BootID: BootID()}
	if v := Check(id); v != Zombie || !v.Dead() {
		t.Fatalf("Check(zombie) = %v, want %v", v, Zombie)
	}
	reaped = true
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Fatalf("zombie not reaped: kill(0) = %v", err)
	}
}

func TestReadStatOddCommandName(t *testing.T) {
	t.Parallel()
	// A command name with spaces and parentheses must not shift fields.
	dir := t.TempDir()
	name := dir + "/a) b (c"
	if err := os.Symlink("/bin/sleep", name); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	st, err := readStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := readStat(os.Getpid())
	if st.startTime < self.startTime || (st.state != 'S' && st.state != 'R' && st.state != 'D') {
		t.Fatalf("stat of %q = %+v (self start %d)", name, st, self.startTime)
	}
}

func TestVerdictString(t *testing.T) {
	t.Parallel()
	want := map[Verdict]string{Alive: "alive", Gone: "pid gone", Reused: "pid reused", OtherBoot: "other boot", Zombie: "zombie", Foreign: "other machine"}
	for v, s := range want {
		if v.String() != s {
			t.Errorf("%d.String() = %q, want %q", v, v.String(), s)
		}
	}
}
