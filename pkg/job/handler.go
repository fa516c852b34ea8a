package job

import (
	"bytes"
	"encoding/json"
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
// into the job's lock. It never replaces an existing file.
func (c *Claimed) RecordHandler(id proc.Identity) error {
	c.mu.Lock()
	lock, done := c.env.Runtime.Lock, c.done
	c.mu.Unlock()
	if done {
		return nil
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
