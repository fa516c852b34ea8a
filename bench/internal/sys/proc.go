// Package sys holds what the benchmark needs from the machine: the
// processes it starts (always stopped by PID), /proc readings (RSS, CPU
// time), filesystem facts, the loop-mounted journaled ext4, Debian packages
// and free ports.
package sys

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Proc is a child process started by the benchmark.
type Proc struct {
	Name    string
	Cmd     *exec.Cmd
	Log     string // stdout+stderr file
	Started time.Time

	waitOnce sync.Once
	waited   chan struct{}
	waitErr  error
}

// PID is the process id.
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

var (
	regMu sync.Mutex
	reg   = map[int]*Proc{}
)

// Start starts cmd with stdout and stderr appended to logPath and registers
// it, so that StopAll can stop it by PID whatever happens.
func Start(name string, cmd *exec.Cmd, logPath string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Its own process group, so that a Ctrl-C of the benchmark does not
	// reach it before the orderly stop; killed if the benchmark dies.
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	p := &Proc{Name: name, Cmd: cmd, Log: logPath, waited: make(chan struct{})}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	f.Close()
	regMu.Lock()
	reg[p.PID()] = p
	regMu.Unlock()
	go func() {
		p.waitErr = cmd.Wait()
		regMu.Lock()
		delete(reg, p.PID())
		regMu.Unlock()
		close(p.waited)
	}()
	return p, nil
}

// Done is closed when the process has exited (and was reaped).
func (p *Proc) Done() <-chan struct{} { return p.waited }

// Kill sends SIGKILL to the process (by PID) and waits until it is reaped.
func (p *Proc) Kill() {
	_ = syscall.Kill(p.PID(), syscall.SIGKILL)
	<-p.waited
}

// Stop sends sig to the process (by PID), waits up to grace, then SIGKILLs.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) {
	select {
	case <-p.waited:
		return
	default:
	}
	_ = syscall.Kill(p.PID(), sig)
	select {
	case <-p.waited:
	case <-time.After(grace):
		p.Kill()
	}
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.waited:
		return true
	default:
		return false
	}
}

// StopAll stops every registered process that is still running: SIGTERM,
// then SIGKILL after a grace period. Each is addressed by its own PID.
func StopAll() {
	regMu.Lock()
	ps := make([]*Proc, 0, len(reg))
	for _, p := range reg {
		ps = append(ps, p)
	}
	regMu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(syscall.SIGTERM, 10*time.Second) }()
	}
	wg.Wait()
}

// WaitLog waits until the process's log holds a line containing substr.
func (p *Proc) WaitLog(ctx context.Context, substr string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		if b, err := os.ReadFile(p.Log); err == nil && bytes.Contains(b, []byte(substr)) {
			return time.Now(), nil
		}
		if p.Exited() {
			return time.Time{}, fmt.Errorf("%s exited before logging %q (log %s)", p.Name, substr, p.Log)
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s: no %q in its log within %s (log %s)", p.Name, substr, timeout, p.Log)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Mem is a process's resident memory from /proc/<pid>/status, in KiB.
type Mem struct {
	RSS, HWM int64 // now, and peak
}

// ReadMem reads VmRSS and VmHWM of pid.
func ReadMem(pid int) (Mem, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Mem{}, err
	}
	defer f.Close()
	var m Mem
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			m.RSS = n
		case "VmHWM":
			m.HWM = n
		}
	}
	return m, sc.Err()
}

// CPUTime is utime+stime of pid (and its reaped children) from /proc.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which may contain spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bad stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime 15, cutime 16, cstime 17.
	var ticks int64
	for _, idx := range []int{14, 15, 16, 17} {
		n, _ := strconv.ParseInt(f[idx-3], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), nil // USER_HZ is 100 on Linux
}

// FreePort returns a TCP port free on loopback now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Run runs a command, returning its combined output in the error.
func Run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Syncfs flushes the filesystem holding path (syncfs(2)).
func Syncfs(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

// RemoveTree removes a directory tree (a spool of up to millions of jobs)
// with rm(1), which is faster than os.RemoveAll on huge trees.
func RemoveTree(path string) error {
	if path == "" || path == "/" || !filepath.IsAbs(path) {
		return fmt.Errorf("refusing to remove %q", path)
	}
	var err error
	for try := 0; try < 3; try++ {
		// A writer still running (a fill interrupted by Ctrl-C) can make
		// rm fail with "Directory not empty": try again.
		if err = Run("rm", "-rf", "--one-file-system", path); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return err
}

// TreeCPU is the CPU time (utime+stime) of pid and of its children: pid's
// own with its reaped children's (CPUTime), plus each live child's
// (CPUTime of each process whose parent is pid). For a postmaster it is
// the CPU the whole PostgreSQL instance used so far: its backends are its
// children, counted in its cutime+cstime once they exit.
func TreeCPU(pid int) (time.Duration, error) {
	total, err := CPUTime(pid)
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		if ParentPID(child) != pid {
			continue
		}
		if c, err := CPUTime(child); err == nil { // gone meanwhile: counted in pid's cutime
			total += c
		}
	}
	return total, nil
}

// ParentPID is pid's parent from /proc/pid/stat (field 4), or -1.
func ParentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return -1
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return n
}
