package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/fsq"
)

// HandlerFile, inside a claim lock beside the owner file, names the
// process that runs the job's handler: the leader of a process group of
// its own. A handler can outlive its agent (the parent-death signal
// reaches it a moment later, and never reaches the children it started),
// so recovery makes sure that group is gone before the job can run again.
// Like the owner file it is not fsynced: no process survives a power cut.
const HandlerFile = "handler"

// EnvJobID and EnvJobDir are environment variables of every process
// agentd starts for a job (and, inherited, of what those start): the job's
// id and its directory, in-progress/<agent>/<id> under the spool root.
// Recovery finds the executions of a job by EnvJobDir, even one its agent
// died too early to record in HandlerFile.
const (
	EnvJobID  = "FARRO_JOB_ID"
	EnvJobDir = "FARRO_JOB_DIR"
)

// IsExecutionEnv reports whether entry, an environment entry of some
// process, is the EnvJobDir of an execution of job id in spool s (by any
// agent).
func (s *Spool) IsExecutionEnv(entry []byte, id string) bool {
	prefix := EnvJobDir + "=" + s.StateDir(InProgress) + "/"
	rest, ok := bytes.CutPrefix(entry, []byte(prefix))
	if !ok {
		return false
	}
	agent, name, ok := bytes.Cut(rest, []byte("/"))
	return ok && len(agent) > 0 && string(name) == id
}

// RecordHandler writes the identity of the process running the handler
// into the job's lock. It never replaces an existing file, and writes
// nothing into a lock that no longer names this claim (ErrFenced).
func (c *Claimed) RecordHandler(id proc.Identity) error {
	c.mu.Lock()
	lock, done := c.env.Runtime.Lock, c.done
	err := c.holdsLock()
	c.mu.Unlock()
	if done {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record handler: %w", err)
	}
	b, _ := json.Marshal(id)
	f, err := os.OpenFile(filepath.Join(lock, HandlerFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("record handler: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("record handler: %w", err)
	}
	return nil
}

// ReadHandler returns the handler identity recorded in the lock at path.
// A lock without one yields an error matching fs.ErrNotExist.
func ReadHandler(lock string) (proc.Identity, error) {
	var id proc.Identity
	b, err := fsq.ReadFileCapped(filepath.Join(lock, HandlerFile), fsq.OwnerReadCap)
	if err != nil {
		return id, err
	}
	if err := json.Unmarshal(b, &id); err != nil {
		return id, fmt.Errorf("handler file: %w", err)
	}
	return id, nil
}

// Executions says what StopExecutions found of a job's executions.
type Executions struct {
	Killed  []int // processes (or, for the recorded handler, its group id) sent SIGKILL now
	Waiting bool  // something still runs (just killed, or unkillable): recovery must wait
	Err     error // what could not be checked or done (Waiting is then true)
}

// StopExecutions makes sure that no execution of job id started under
// the claim lock at lock is still running, before the job leaves
// in-progress/ and may run again: whatever the holder's verdict (dead, or
// silent: frozen, stalled, its clock stepped), its handler may still run
// (a handler has a process group of its own, and the parent-death signal
// never reaches its children). It looks for the process group recorded in
// the lock (HandlerFile) and for every process whose environment names
// the job's directory in this spool (EnvJobDir: inherited by whatever an
// execution starts, and set before a handler is recorded). What it finds
// is sent SIGKILL. Gone means proven gone: when anything was found, or
// cannot be checked, Waiting is true and the caller tries again later. A
// process in uninterruptible sleep stays found until its I/O returns, and
// the job stays where it is meanwhile: a job is never run twice at once.
//
// Every recoverer of a claim lock calls it: watchdogd and farroctl fsck
// --repair.
func (s *Spool) StopExecutions(id, lock string) Executions {
	var ex Executions
	if h, err := ReadHandler(lock); err == nil {
		alive, gerr := proc.GroupAlive(h)
		switch {
		case alive && gerr != nil:
			return Executions{Waiting: true, Err: fmt.Errorf("handler group %d: %w", h.PID, gerr)}
		case alive:
			ex.Waiting = true
			if err := syscall.Kill(-h.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return Executions{Waiting: true, Err: fmt.Errorf("kill handler group %d: %w", h.PID, err)}
			}
			ex.Killed = append(ex.Killed, h.PID)
		}
	}
	pids, err := proc.WithEnv(func(kv []byte) bool { return s.IsExecutionEnv(kv, id) })
	if err != nil {
		return Executions{Waiting: true, Killed: ex.Killed, Err: fmt.Errorf("look for executions: %w", err)}
	}
	for _, pid := range pids {
		ex.Waiting = true
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			ex.Err = errors.Join(ex.Err, fmt.Errorf("kill %d: %w", pid, err))
			continue
		}
		ex.Killed = append(ex.Killed, pid)
	}
	return ex
}
