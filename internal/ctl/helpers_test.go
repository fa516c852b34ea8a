package ctl_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/job"
)

// env is a spool plus a Ctl writing into buffers.
type env struct {
	t      *testing.T
	s      *job.Spool
	stdout *bytes.Buffer
	stderr *bytes.Buffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, s: s, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
}

// ctl returns a Ctl reading stdin, with fresh output buffers.
func (e *env) ctl(stdin string) *ctl.Ctl {
	e.stdout.Reset()
	e.stderr.Reset()
	return &ctl.Ctl{Root: e.s.Root, Stdin: strings.NewReader(stdin), Stdout: e.stdout, Stderr: e.stderr}
}

// submit creates a job through the real transaction.
func (e *env) submit(id string, mod func(*job.SubmitRequest)) {
	e.t.Helper()
	req := job.SubmitRequest{ID: id, Kind: "noop", Prompt: []byte(`{"n":1}`)}
	if mod != nil {
		mod(&req)
	}
	if _, err := e.s.Submit(req); err != nil {
		e.t.Fatalf("Submit %s: %v", id, err)
	}
}

var holder = job.Holder{Actor: "agentd/t1", Agent: "t1"}

// claim submits and claims a job as agent t1 (the test process is the
// live owner of its lock).
func (e *env) claim(id string) *job.Claimed {
	e.t.Helper()
	e.submit(id, nil)
	c, err := e.s.Claim(id, holder)
	if err != nil {
		e.t.Fatalf("Claim %s: %v", id, err)
	}
	return c
}

// failed returns a job committed failed by its agent.
func (e *env) failed(id string) {
	e.t.Helper()
	c := e.claim(id)
	if err := c.Commit(job.Failed, "exit 1", nil); err != nil {
		e.t.Fatal(err)
	}
}

// where returns the single location of id.
func (e *env) where(id string) job.Location {
	e.t.Helper()
	locs, err := e.s.Locate(id)
	if err != nil {
		e.t.Fatalf("Locate %s: %v", id, err)
	}
	if len(locs) != 1 {
		e.t.Fatalf("%s in %d places: %v", id, len(locs), locs)
	}
	return locs[0]
}

// read returns the job.json of id, checking that its status matches its
// directory.
func (e *env) read(id string) *job.Job {
	e.t.Helper()
	loc := e.where(id)
	j, err := job.ReadJob(loc.Dir)
	if err != nil {
		e.t.Fatal(err)
	}
	if j.Status != loc.State {
		e.t.Fatalf("%s: status %s in %s", id, j.Status, loc.State)
	}
	return j
}

// tree lists every path below root with its type, size and a hash of its
// content, so that two listings differ if anything was created, removed,
// renamed or rewritten.
func tree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == job.StreamDir {
			return filepath.SkipDir // the event stream: a log of what happened, not spool state
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %s", rel, info.Mode().Type())
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " " + hex.EncodeToString(sum[:8])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// deadOwner returns an owner file naming a process that has exited and
// been reaped: its pid is gone.
func deadOwner(t *testing.T, actor, agent string) []byte {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	o := job.Owner{
		Identity: proc.Identity{Hostname: host, PID: cmd.ProcessState.Pid(), StartTime: 1, BootID: proc.BootID()},
		Actor:    actor, Agent: agent, Token: "deadbeef", AcquiredAt: time.Now().UTC().Add(-time.Minute),
	}
	if v := proc.Check(o.Identity); !v.Dead() {
		t.Skipf("pid %d of a reaped child is in use again (%s)", o.PID, v)
	}
	b, _ := json.Marshal(o)
	return b
}

// age backdates path's mtime.
func age(t *testing.T, path string, d time.Duration) {
	t.Helper()
	old := time.Now().Add(-d)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lines splits output into non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}
