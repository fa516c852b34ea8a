// Package proc identifies processes so that a lock owner can be told apart
// from a later process that reuses its pid, and checks whether an owner is
// still alive. Linux only: it reads /proc.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Identity names one process for the lifetime of one boot.
//
// The host is machine id plus boot id; the hostname is for display only
// (it changes with hostnamectl, cloud renames, containers). MachineID is
// empty in identities written before it existed, and on hosts without
// one.
type Identity struct {
	Hostname  string `json:"hostname"`
	MachineID string `json:"machine_id,omitempty"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"` // clock ticks since boot, /proc/<pid>/stat field 22
	BootID    string `json:"boot_id"`
}

var (
	selfOnce sync.Once
	self     Identity
)

// Self returns the identity of the calling process.
func Self() Identity {
	selfOnce.Do(func() {
		self.Hostname, _ = os.Hostname()
		self.PID = os.Getpid()
		if st, err := readStat(self.PID); err == nil {
			self.StartTime = st.startTime
		}
		self.BootID = BootID()
		self.MachineID = MachineID()
	})
	return self
}

// The sources of the host's identity; tests replace them.
var (
	bootIDFiles    = []string{"/proc/sys/kernel/random/boot_id"}
	machineIDFiles = []string{"/etc/machine-id", "/var/lib/dbus/machine-id"}
)

// BootID returns the kernel's random boot id ("" if unreadable).
func BootID() string { return firstLine(bootIDFiles) }

// MachineID returns the host's machine id: /etc/machine-id, else
// /var/lib/dbus/machine-id, else "".
func MachineID() string { return firstLine(machineIDFiles) }

// firstLine returns the trimmed content of the first readable, non-empty
// file of paths.
func firstLine(paths []string) string {
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			return s
		}
	}
	return ""
}

// Verdict is the outcome of a liveness check.
type Verdict int

const (
	// Alive: the process exists and is the one named, or the check could
	// not be completed (an error while checking means alive).
	Alive Verdict = iota
	// Gone: no process has that pid.
	Gone
	// Reused: the pid belongs to another process (start time differs).
	Reused
	// OtherBoot: the identity was written during an earlier boot.
	OtherBoot
	// Zombie: the process has exited and waits to be reaped.
	Zombie
	// Foreign: the process runs on another machine (its machine id
	// differs) sharing the spool. Not ours to judge, so not dead; reported
	// apart so that an operator can see it.
	Foreign
)

func (v Verdict) String() string {
	return [...]string{"alive", "pid gone", "pid reused", "other boot", "zombie", "other machine"}[v]
}

// Dead reports whether the verdict means the owner can no longer act.
func (v Verdict) Dead() bool { return v != Alive && v != Foreign }

// Check tells whether the process named by id is still running. Only a
// positive proof of death returns a dead verdict; anything uncertain
// (permission trouble, unreadable /proc) is Alive, and an owner on
// another machine is Foreign (not dead).
//
// The host is judged by machine id, then boot id; the hostname is never
// compared. Both machine ids known and different: Foreign. Otherwise (the
// same machine id, or either unknown, as in owner files written before
// machine ids were recorded) a different boot id is OtherBoot.
func Check(id Identity) Verdict {
	if id.PID <= 0 {
		return Alive
	}
	if mid := MachineID(); id.MachineID != "" && mid != "" && id.MachineID != mid {
		return Foreign // not ours to judge
	}
	if boot := BootID(); id.BootID != "" && boot != "" && id.BootID != boot {
		return OtherBoot
	}
	st, err := readStat(id.PID)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if kerr := syscall.Kill(id.PID, 0); errors.Is(kerr, syscall.ESRCH) {
				return Gone
			}
		}
		return Alive
	}
	if id.StartTime != 0 && st.startTime != id.StartTime {
		return Reused
	}
	if st.state == 'Z' || st.state == 'X' {
		return Zombie
	}
	return Alive
}

type stat struct {
	state     byte
	pgrp      int
	startTime uint64
}

func readStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	// The command name (field 2) may contain spaces and parentheses: the
	// fields after it start behind the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return stat{}, fmt.Errorf("proc %d: malformed stat", pid)
	}
	fields := strings.Fields(string(b[i+2:]))
	// fields[0] is field 3 (state); field 22 (starttime) is fields[19].
	if len(fields) < 20 {
		return stat{}, fmt.Errorf("proc %d: short stat", pid)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("proc %d: starttime: %w", pid, err)
	}
	pgrp, err := strconv.Atoi(fields[2]) // field 5
	if err != nil {
		return stat{}, fmt.Errorf("proc %d: pgrp: %w", pid, err)
	}
	return stat{state: fields[0][0], pgrp: pgrp, startTime: start}, nil
}
