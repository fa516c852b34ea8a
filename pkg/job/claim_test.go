package job_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

func TestClaim(t *testing.T) {
	t.Parallel()
	s := setup(t)
	submit(t, s, "j1")
	before := time.Now().UTC()
	c, err := s.Claim("j1", holder)
	if err != nil {
		t.Fatal(err)
	}
	env := c.Envelope()
	dir := s.JobDir(job.InProgress, "w1", "j1")
	if env.Runtime.Dir != dir || env.Runtime.Lock != s.LockPath("j1") {
		t.Fatalf("runtime = %+v", env.Runtime)
	}
	if string(env.Prompt) != testPrompt {
		t.Fatalf("prompt = %q", env.Prompt)
	}
	mustNotExist(t, s.JobDir(job.Queued, "", "j1"))
	got := readJob(t, dir)
	if got.Status != job.InProgress || got.Attempts != 1 || got.Agent != "w1" {
		t.Fatalf("job.json = %+v", got)
	}
	if !strings.HasPrefix(got.CorrelationID, "j1/1-") || got.CorrelationID != env.Lifecycle.CorrelationID {
		t.Fatalf("correlation_id = %q (in memory %q)", got.CorrelationID, env.Lifecycle.CorrelationID)
	}
	if got.LastHeartbeat == nil || got.LastHeartbeat.Before(before) || got.StartedAt == nil {
		t.Fatalf("last_heartbeat = %v, started_at = %v", got.LastHeartbeat, got.StartedAt)
	}
	o := owner(t, s, "j1")
	if o.PID != os.Getpid() || o.Agent != "w1" || o.Actor != "agentd/w1" || o.Token == "" {
		t.Fatalf("owner = %+v", o)
	}
	if v := proc.Check(o.Identity); v != proc.Alive {
		t.Fatalf("owner identity checks as %v, want alive", v)
	}
	evs := events(t, dir)
	if len(evs) != 2 {
		t.Fatalf("events = %+v", evs)
	}
	if ev := evs[1]; ev.From != job.Queued || ev.To != job.InProgress || ev.Actor != "agentd/w1" || ev.Attempt != 1 || ev.CorrelationID != got.CorrelationID {
		t.Fatalf("claim event = %+v", ev)
	}

	// A second attempt gets a new correlation id and attempts 2, and
	// job.json tells this attempt's outcome only: the first one's error
	// and exit code stay in its history.
	code := 3
	if err := c.Commit(job.Queued, "released", func(j *job.Job) { j.Error, j.ExitCode = "exit status 3", &code }); err != nil {
		t.Fatal(err)
	}
	if q := readJob(t, s.JobDir(job.Queued, "", "j1")); q.Error != "exit status 3" {
		t.Fatalf("queued after attempt 1: error %q, want the attempt's", q.Error)
	}
	c2, err := s.Claim("j1", job.Holder{Actor: "agentd/w2", Agent: "w2"})
	if err != nil {
		t.Fatal(err)
	}
	j2 := c2.Envelope().Lifecycle
	if j2.Attempts != 2 || j2.CorrelationID == got.CorrelationID || !strings.HasPrefix(j2.CorrelationID, "j1/2-") {
		t.Fatalf("second claim: attempts %d, correlation %q", j2.Attempts, j2.CorrelationID)
	}
	if j2.Error != "" || j2.ExitCode != nil {
		t.Fatalf("second claim keeps the first attempt's outcome: error %q, exit code %v", j2.Error, j2.ExitCode)
	}
	if err := c2.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	if done := readJob(t, s.JobDir(job.Succeeded, "", "j1")); done.Error != "" {
		t.Fatalf("a succeeded job shows an earlier attempt's error %q", done.Error)
	}
}

func TestClaimLocked(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	lock := readRaw(t, filepath.Join(s.LockPath("j1"), fsq.OwnerFile))
	before := tree(t, s.Root)
	for _, h := range []job.Holder{holder, {Actor: "agentd/w2", Agent: "w2"}} {
		if _, err := s.Claim("j1", h); !errors.Is(err, fsq.ErrLocked) {
			t.Fatalf("second claim by %s = %v, want ErrLocked", h.Agent, err)
		}
	}
	sameTree(t, before, tree(t, s.Root))
	if got := readRaw(t, filepath.Join(s.LockPath("j1"), fsq.OwnerFile)); string(got) != string(lock) {
		t.Fatal("losing claim changed the owner file")
	}
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
}

func TestClaimVanished(t *testing.T) {
	t.Parallel()
	s := setup(t)
	if _, err := s.Claim("nope", holder); !errors.Is(err, fsq.ErrVanished) {
		t.Fatalf("claim of a missing job = %v, want ErrVanished", err)
	}
	mustNotExist(t, s.LockPath("nope"))
	// Nothing but the agent's private lock pool: no job directory.
	if ents, err := os.ReadDir(s.AgentDir("w1")); err == nil {
		for _, e := range ents {
			if e.Name() != job.PoolDir {
				t.Fatalf("in-progress/w1/%s after a claim of a missing job", e.Name())
			}
		}
	}
}

func TestClaimBadIDs(t *testing.T) {
	t.Parallel()
	s := setup(t)
	before := tree(t, s.Root)
	for _, id := range []string{"../x", "a/b", "..", "", "x.lock"} {
		if _, err := s.Claim(id, holder); err == nil {
			t.Errorf("Claim(%q) succeeded", id)
		}
	}
	submit(t, s, "j1")
	before = tree(t, s.Root)
	if _, err := s.Claim("j1", job.Holder{Actor: "a", Agent: "../evil"}); err == nil {
		t.Error("Claim with agent id ../evil succeeded")
	}
	sameTree(t, before, tree(t, s.Root))
}

func TestClaimSchemaMismatch(t *testing.T) {
	t.Parallel()
	s := setup(t)
	dir := place(t, s, job.Queued, "", "j1", job.Queued, func(j *job.Job) { j.SchemaVersion = "9.9.9" })
	before := tree(t, s.Root)
	_, err := s.Claim("j1", holder)
	if !errors.Is(err, job.ErrSchema) {
		t.Fatalf("claim = %v, want ErrSchema", err)
	}
	if !strings.Contains(err.Error(), "9.9.9") {
		t.Errorf("error %q does not name the version", err)
	}
	sameTree(t, before, tree(t, s.Root)) // lock released, job untouched in incoming/
	mustExist(t, dir)
	dirEmpty(t, s.Path(job.CorruptDir))
}

func TestClaimNotQueued(t *testing.T) {
	t.Parallel()
	s := setup(t)
	place(t, s, job.Queued, "", "j1", job.Held, nil)
	before := tree(t, s.Root)
	if _, err := s.Claim("j1", holder); !errors.Is(err, job.ErrState) {
		t.Fatalf("claim = %v, want ErrState", err)
	}
	sameTree(t, before, tree(t, s.Root))
}

// quarantined checks that exactly one entry (plus its note) was moved to
// corrupt/ from incoming/<id> and returns its path.
func quarantined(t *testing.T, s *job.Spool, id string) string {
	t.Helper()
	des, err := os.ReadDir(s.Path(job.CorruptDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != 2 {
		t.Fatalf("corrupt/ holds %d entries, want the job and its note", len(des))
	}
	var entry, note string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".quarantine.json") {
			note = s.Path(job.CorruptDir, de.Name())
		} else {
			entry = s.Path(job.CorruptDir, de.Name())
		}
	}
	if !strings.HasPrefix(filepath.Base(entry), id+".") || note != entry+".quarantine.json" {
		t.Fatalf("corrupt/ holds %q and %q", entry, note)
	}
	var n struct {
		From, Reason string
		At           time.Time
	}
	if err := json.Unmarshal(readRaw(t, note), &n); err != nil {
		t.Fatalf("note: %v", err)
	}
	if n.From != s.JobDir(job.Queued, "", id) || n.Reason == "" || n.At.IsZero() {
		t.Fatalf("note = %+v", n)
	}
	mustNotExist(t, s.JobDir(job.Queued, "", id))
	mustNotExist(t, s.LockPath(id))
	return entry
}

func TestClaimCorruptJobJSON(t *testing.T) {
	t.Parallel()
	valid := func() []byte {
		j := job.Job{SchemaVersion: job.SchemaVersion, ID: "j1", Kind: "noop", Status: job.Queued}
		return j.Marshal()
	}()
	cases := map[string]func(t *testing.T, dir string){
		"truncated": func(t *testing.T, dir string) { writeRaw(t, filepath.Join(dir, job.JobFile), valid[:len(valid)/2]) },
		"not JSON":  func(t *testing.T, dir string) { writeRaw(t, filepath.Join(dir, job.JobFile), []byte("hello\n")) },
		"empty":     func(t *testing.T, dir string) { writeRaw(t, filepath.Join(dir, job.JobFile), nil) },
		"missing":   func(t *testing.T, dir string) { _ = os.Remove(filepath.Join(dir, job.JobFile)) },
		"a directory": func(t *testing.T, dir string) {
			_ = os.Remove(filepath.Join(dir, job.JobFile))
			_ = os.Mkdir(filepath.Join(dir, job.JobFile), 0o755)
		},
		"other id": func(t *testing.T, dir string) {
			writeRaw(t, filepath.Join(dir, job.JobFile), []byte(strings.Replace(string(valid), `"j1"`, `"j2"`, 1)))
		},
		"unknown status": func(t *testing.T, dir string) {
			writeRaw(t, filepath.Join(dir, job.JobFile), []byte(strings.Replace(string(valid), `"queued"`, `"running"`, 1)))
		},
		"no prompt.json": func(t *testing.T, dir string) { _ = os.Remove(filepath.Join(dir, job.PromptFile)) },
		"no schema field": func(t *testing.T, dir string) {
			writeRaw(t, filepath.Join(dir, job.JobFile), []byte(`{"id":"j1","kind":"noop","status":"queued"}`))
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := setup(t)
			dir := place(t, s, job.Queued, "", "j1", job.Queued, nil)
			spoil(t, dir)
			_, err := s.Claim("j1", holder)
			if !errors.Is(err, job.ErrCorrupt) {
				t.Fatalf("claim = %v, want ErrCorrupt", err)
			}
			q := quarantined(t, s, "j1")
			if ok, _ := fsq.IsRealDir(q); !ok {
				t.Fatalf("%s is not the quarantined job directory", q)
			}
			mustNotExist(t, s.AgentDir("w1")+"/j1")
		})
	}
}

func TestClaimSymlinkAsJobDir(t *testing.T) {
	t.Parallel()
	s := setup(t)
	// A real, valid job directory outside the spool.
	other := setup(t)
	target := place(t, other, job.Queued, "", "j1", job.Queued, nil)
	targetBefore := tree(t, target)
	if err := os.Symlink(target, s.JobDir(job.Queued, "", "j1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim("j1", holder); !errors.Is(err, job.ErrCorrupt) {
		t.Fatalf("claim of a symlink = %v, want ErrCorrupt", err)
	}
	q := quarantined(t, s, "j1")
	if fi, err := os.Lstat(q); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("quarantined entry is not the planted link: %v", err)
	}
	sameTree(t, targetBefore, tree(t, target))
	mustNotExist(t, s.JobDir(job.InProgress, "w1", "j1"))
}

func TestClaimSymlinkAsJobFile(t *testing.T) {
	t.Parallel()
	s := setup(t)
	other := setup(t)
	target := place(t, other, job.Queued, "", "j1", job.Queued, nil)
	targetBefore := tree(t, target)
	dir := place(t, s, job.Queued, "", "j1", job.Queued, nil)
	if err := os.Remove(filepath.Join(dir, job.JobFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(target, job.JobFile), filepath.Join(dir, job.JobFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim("j1", holder); !errors.Is(err, job.ErrCorrupt) {
		t.Fatalf("claim = %v, want ErrCorrupt", err)
	}
	quarantined(t, s, "j1")
	sameTree(t, targetBefore, tree(t, target))
}

func TestClaimSymlinkAsLock(t *testing.T) {
	t.Parallel()
	s := setup(t)
	submit(t, s, "j1")
	target := t.TempDir()
	if err := os.Symlink(target, s.LockPath("j1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim("j1", holder); !errors.Is(err, fsq.ErrLocked) {
		t.Fatalf("claim with a planted lock link = %v, want ErrLocked", err)
	}
	dirEmpty(t, target)
	// Recovery removes the link, not what it points at, and the job is
	// claimable again.
	if _, err := s.RecoverLock("j1", "watchdogd", "no owner file"); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, s.LockPath("j1"))
	mustExist(t, target)
	c, err := s.Claim("j1", holder)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
}
