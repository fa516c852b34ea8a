package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Of returns the identity of the running process pid.
func Of(pid int) (Identity, error) {
	st, err := readStat(pid)
	if err != nil {
		return Identity{}, err
	}
	host, _ := os.Hostname()
	return Identity{Hostname: host, MachineID: MachineID(), PID: pid, StartTime: st.startTime, BootID: BootID()}, nil
}

// GroupAlive reports whether the process group that leader led (a handler
// started in a group of its own: its pid is the group id) still has a
// live member, zombies aside: the leader itself, or children it left
// behind. Only what is proven gone is reported gone: an error while
// checking, or a leader on another machine (machine id, as in Check), is
// alive (with the error).
//
// A group whose id now belongs to another process (a different start
// time) is gone: Linux does not reuse a pid while a process group of that
// id exists.
func GroupAlive(leader Identity) (bool, error) {
	if leader.PID <= 0 {
		return false, nil
	}
	if mid := MachineID(); leader.MachineID != "" && mid != "" && leader.MachineID != mid {
		return true, fmt.Errorf("process group %d is on another machine (%s, machine id %s), not ours to judge", leader.PID, leader.Hostname, leader.MachineID)
	}
	if boot := BootID(); leader.BootID != "" && boot != "" && leader.BootID != boot {
		return false, nil
	}
	if st, err := readStat(leader.PID); err == nil && leader.StartTime != 0 && st.startTime != leader.StartTime {
		return false, nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		if st.pgrp == leader.PID && st.state != 'Z' && st.state != 'X' {
			return true, nil
		}
	}
	return false, nil
}

// WithEnv returns the live processes (zombies aside, the caller excluded)
// with an environment entry ("NAME=value", as execve gave it to them) for
// which match is true. Processes whose environment cannot be read
// (another user's) are not reported.
func WithEnv(match func(entry []byte) bool) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || len(env) == 0 {
			continue
		}
		found := false
		for _, kv := range bytes.Split(env, []byte{0}) {
			if match(kv) {
				found = true
				break
			}
		}
		if !found {
			continue
		}
		if st, err := readStat(pid); err == nil && st.state != 'Z' && st.state != 'X' {
			out = append(out, pid)
		}
	}
	return out, nil
}
