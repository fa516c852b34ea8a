package proc

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestSelf(t *testing.T) {
	t.Parallel()
	id := Self()
	if id.PID != os.Getpid() || id.StartTime == 0 || id.BootID == "" || id.Hostname == "" {
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

func TestCheckUncertainIsAlive(t *testing.T) {
	t.Parallel()
	for name, id := range map[string]Identity{
		"other host": {Hostname: "some-other-host.invalid", PID: 1 << 30, BootID: "x"},
		"no pid":     {},
		"pid 1":      {PID: 1}, // exists; no start time to compare
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
	want := map[Verdict]string{Alive: "alive", Gone: "pid gone", Reused: "pid reused", OtherBoot: "other boot", Zombie: "zombie"}
	for v, s := range want {
		if v.String() != s {
			t.Errorf("%d.String() = %q, want %q", v, v.String(), s)
		}
	}
}
