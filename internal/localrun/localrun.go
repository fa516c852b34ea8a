// Package localrun keeps, in a host's local directory, a record of each
// handler agentd runs on that host for a job of a shared store
// (PostgreSQL): which job, which claim (its fencing token), the claim's
// lease, and the handler's process. The database cannot stop a process on
// another machine; each host's watchdogd reads these records and stops
// the handlers of its own host whose claim is no longer current (lease
// expired, job taken away). A record is written when the handler starts
// and removed when it has exited; a record left by an agentd killed with
// its handler names a process group that is gone, and is removed by the
// next watchdogd pass.
package localrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// Dir is the records' directory under a host's local directory (hidden
// from spool listings, as every dot entry).
const Dir = ".handlers"

// maxRecord caps a record's read: a hostile or broken file is refused,
// never read whole.
const maxRecord = 64 << 10

// Record is one running handler of a store's claim on this host.
type Record struct {
	JobID      string        `json:"job_id"`
	Agent      string        `json:"agent"`
	ClaimToken string        `json:"claim_token"`
	Attempt    int           `json:"attempt"`
	LeaseMS    int64         `json:"lease_ms"`
	Handler    proc.Identity `json:"handler"`
	Started    time.Time     `json:"started"`
}

// Lease is the claim's lease.
func (r Record) Lease() time.Duration { return time.Duration(r.LeaseMS) * time.Millisecond }

// name is a record's file name: one per claim (agent, job and fencing
// token), so that an attempt's record is never replaced or removed by
// another attempt's of the same job on the same agent (the commit of a
// fenced attempt runs behind the slot, while the job's next claim may
// already be starting its handler here).
func name(agent, id, token string) string { return agent + "." + id + "." + token + ".json" }

// Write records r under local (atomically: a reader sees the whole record
// or none).
func Write(local string, r Record) error {
	if err := job.ValidateID(r.JobID); err != nil {
		return err
	}
	if err := job.ValidateID(r.Agent); err != nil {
		return err
	}
	if err := job.ValidateID(r.ClaimToken); err != nil {
		return fmt.Errorf("claim token: %w", err)
	}
	dir := filepath.Join(local, Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(r)
	return WriteFile(filepath.Join(dir, name(r.Agent, r.JobID, r.ClaimToken)), append(b, '\n'))
}

// WriteFile replaces path with data atomically (a temporary dot file
// beside it, renamed over it: a reader sees all or nothing, and a symlink
// at path is replaced, never followed), without an fsync: what it writes
// matters only while this host is up (a record names processes a crash
// of the host ends; a prompt is the database's).
func WriteFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Remove deletes the record of agent's handler of job id for the claim
// whose fencing token is token (none: nil); another claim's record of
// the same job stays.
func Remove(local, agent, id, token string) error {
	if job.ValidateID(agent) != nil || job.ValidateID(id) != nil || job.ValidateID(token) != nil {
		return nil // never written
	}
	err := os.Remove(filepath.Join(local, Dir, name(agent, id, token)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Entry is one record as listed, or the error that made it unreadable
// (Path names it, for the caller to log and remove).
type Entry struct {
	Path   string
	Record Record
	Err    error
}

// List returns the records under local, each read with a cap and without
// following a symlink or blocking on a FIFO. No directory: none.
func List(local string) ([]Entry, error) {
	dir := filepath.Join(local, Dir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".json") {
			continue // a writer's temporary file
		}
		en := Entry{Path: filepath.Join(dir, n)}
		b, err := fsq.ReadFileCapped(en.Path, maxRecord)
		if err == nil {
			if err = json.Unmarshal(b, &en.Record); err == nil && name(en.Record.Agent, en.Record.JobID, en.Record.ClaimToken) != n {
				err = fmt.Errorf("record names job %q of agent %q, claim %q, not its file's", en.Record.JobID, en.Record.Agent, en.Record.ClaimToken)
			}
		}
		en.Err = err
		out = append(out, en)
	}
	return out, nil
}
