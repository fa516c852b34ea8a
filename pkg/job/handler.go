package job

import (
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
	b, err := fsq.ReadFileNoFollow(filepath.Join(lock, HandlerFile))
	if err != nil {
		return id, err
	}
	if err := json.Unmarshal(b, &id); err != nil {
		return id, fmt.Errorf("handler file: %w", err)
	}
	return id, nil
}
