package job_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(streamWriterEnv); spec != "" {
		runStreamWriter(spec) // a child of TestStreamConcurrentProcesses
	}
	goleak.VerifyTestMain(m)
}

// setup opens a fresh spool on the real filesystem.
func setup(t *testing.T) *job.Spool {
	t.Helper()
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

var holder = job.Holder{Actor: "agentd/w1", Agent: "w1"}

const testPrompt = `{"cmd":"echo","n":1}`

// submit creates a queued job through the real transaction.
func submit(t *testing.T, s *job.Spool, id string) *job.Job {
	t.Helper()
	j, err := s.Submit(job.SubmitRequest{ID: id, Kind: "noop", Prompt: []byte(testPrompt)})
	if err != nil {
		t.Fatalf("Submit %s: %v", id, err)
	}
	return j
}

// claim submits and claims a job.
func claim(t *testing.T, s *job.Spool, id string) *job.Claimed {
	t.Helper()
	submit(t, s, id)
	c, err := s.Claim(id, holder)
	if err != nil {
		t.Fatalf("Claim %s: %v", id, err)
	}
	return c
}

// place builds a job directory by hand in st's directory with the given
// status, as a crash or an earlier transaction might have left it, and
// returns its path.
func place(t *testing.T, s *job.Spool, st job.State, agent, id string, status job.State, mutate func(*job.Job)) string {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	j := &job.Job{
		SchemaVersion: job.SchemaVersion, ID: id, Kind: "noop", Status: status,
		Attempts: 1, CreatedAt: now, UpdatedAt: now,
	}
	if status == job.InProgress || st == job.InProgress {
		j.Agent = agent
		j.CorrelationID = id + "/1-abcdef"
		j.StartedAt, j.LastHeartbeat = &now, &now
	}
	if mutate != nil {
		mutate(j)
	}
	dir := s.JobDir(st, agent, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeRaw(t, filepath.Join(dir, job.JobFile), j.Marshal())
	writeRaw(t, filepath.Join(dir, job.PromptFile), []byte(testPrompt))
	return dir
}

func writeRaw(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readRaw(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readJob decodes dir/job.json strictly as a job.
func readJob(t *testing.T, dir string) *job.Job {
	t.Helper()
	j, err := job.ReadJob(dir)
	if err != nil {
		t.Fatalf("ReadJob %s: %v", dir, err)
	}
	return j
}

// events decodes dir/events.jsonl.
func events(t *testing.T, dir string) []job.Event {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, job.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []job.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev job.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("events.jsonl line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func mustExist(t *testing.T, path string) {
	t.Helper()
	if !exists(path) {
		t.Fatalf("%s does not exist", path)
	}
}

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		t.Fatalf("%s exists, want it absent", path)
	}
}

func dirEmpty(t *testing.T, dir string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != 0 {
		var n []string
		for _, de := range des {
			n = append(n, de.Name())
		}
		t.Fatalf("%s holds %q, want empty", dir, n)
	}
}

// tree maps every path below root (relative) to its content (files),
// "<dir>" or "-> target" (symlinks), to prove that nothing changed. An
// agent's lock pool (in-progress/<agent>/.locks, its private store of lock
// directories) is not part of it, nor an agent directory holding nothing
// else.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && d.Name() == job.PoolDir && filepath.Dir(filepath.Dir(rel)) == job.InProgress.Dir() {
			return filepath.SkipDir
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
		case d.IsDir():
			out[rel] = "<dir>"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range out {
		if v != "<dir>" || filepath.Dir(k) != job.InProgress.Dir() {
			continue
		}
		empty := true
		for k2 := range out {
			if strings.HasPrefix(k2, k+"/") {
				empty = false
				break
			}
		}
		if empty {
			delete(out, k)
		}
	}
	return out
}

func sameTree(t *testing.T, before, after map[string]string) {
	t.Helper()
	if reflect.DeepEqual(before, after) {
		return
	}
	var diff []string
	for k, v := range after {
		if bv, ok := before[k]; !ok {
			diff = append(diff, "+ "+k)
		} else if bv != v {
			diff = append(diff, "~ "+k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			diff = append(diff, "- "+k)
		}
	}
	sort.Strings(diff)
	t.Fatalf("spool changed: %q", diff)
}

// owner parses the owner file of job id's lock.
func owner(t *testing.T, s *job.Spool, id string) job.Owner {
	t.Helper()
	b, err := fsq.ReadOwner(s.LockPath(id))
	if err != nil {
		t.Fatalf("owner of %s: %v", id, err)
	}
	o, err := job.ParseOwner(b)
	if err != nil {
		t.Fatalf("owner of %s: %v", id, err)
	}
	return o
}

// deadOwner plants a lock whose owner is a process that cannot exist.
func deadOwner(t *testing.T, s *job.Spool, id string) {
	t.Helper()
	o := job.NewOwner("agentd/w1", "w1")
	o.PID = 1 << 30
	b, _ := json.Marshal(o)
	if err := fsq.TryLock(s.LockPath(id), b); err != nil {
		t.Fatal(err)
	}
}

func lines(b []byte) int { return bytes.Count(b, []byte("\n")) }
