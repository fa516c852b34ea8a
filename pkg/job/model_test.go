package job_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/farro-dev/farro/pkg/job"
)

func TestValidateID(t *testing.T) {
	t.Parallel()
	good := []string{"a", "0", "job-1", "A.b_c-9", "20261121T114512.123456Z-9f3a1c", strings.Repeat("x", 128), "x.locked", "lock"}
	bad := []string{"", ".", "..", "../x", "a/b", "/abs", "-a", "_a", ".a", "a b", "a\x00", "a\n", "é", "x.lock", "a.b.lock", strings.Repeat("x", 129)}
	for _, id := range good {
		if err := job.ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range bad {
		if err := job.ValidateID(id); err == nil {
			t.Errorf("ValidateID(%q) = nil, want an error", id)
		}
	}
}

func TestParseJob(t *testing.T) {
	t.Parallel()
	base := map[string]any{"schema_version": "1.0.0", "id": "j1", "kind": "noop", "status": "queued", "attempts": 0, "max_attempts": 0}
	with := func(k string, v any) []byte {
		m := map[string]any{}
		for kk, vv := range base {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		return b
	}
	if j, err := job.ParseJob(with("id", "j1")); err != nil || j.ID != "j1" || j.Status != job.Queued {
		t.Fatalf("valid job: %+v, %v", j, err)
	}
	corrupt := map[string][]byte{
		"not JSON":         []byte("nope"),
		"truncated":        with("id", "j1")[:20],
		"no schema":        with("schema_version", nil),
		"bad id":           with("id", "../x"),
		"unknown status":   with("status", "running"),
		"no kind":          with("kind", nil),
		"negative attempt": with("attempts", -1),
		"wrong type":       with("attempts", "one"),
	}
	for name, data := range corrupt {
		if _, err := job.ParseJob(data); !errors.Is(err, job.ErrCorrupt) {
			t.Errorf("%s: ParseJob = %v, want ErrCorrupt", name, err)
		}
	}
	j, err := job.ParseJob(with("schema_version", "9.9.9"))
	if !errors.Is(err, job.ErrSchema) || errors.Is(err, job.ErrCorrupt) {
		t.Fatalf("unknown schema: %v, want ErrSchema", err)
	}
	if j == nil || j.ID != "j1" {
		t.Fatalf("unknown schema: job not returned for the log: %+v", j)
	}
}

func TestJobJSONIsSnakeCase(t *testing.T) {
	t.Parallel()
	s := setup(t)
	c := claim(t, s, "j1")
	code := 0
	if err := c.Commit(job.Succeeded, "ok", func(j *job.Job) { j.ExitCode = &code }); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(readRaw(t, s.JobDir(job.Succeeded, "", "j1")+"/"+job.JobFile), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema_version", "id", "kind", "status", "priority", "attempts", "max_attempts",
		"created_at", "updated_at", "agent", "correlation_id", "started_at", "last_heartbeat", "finished_at", "exit_code", "reason"} {
		if _, ok := m[k]; !ok {
			t.Errorf("job.json lacks %q", k)
		}
	}
	for k := range m {
		if strings.ToLower(k) != k || strings.Contains(k, "-") {
			t.Errorf("key %q is not snake_case", k)
		}
	}
}

func TestEffectiveMaxAttempts(t *testing.T) {
	t.Parallel()
	if got := (&job.Job{}).EffectiveMaxAttempts(3); got != 3 {
		t.Errorf("0 -> %d, want the default 3", got)
	}
	if got := (&job.Job{MaxAttempts: 5}).EffectiveMaxAttempts(3); got != 5 {
		t.Errorf("5 -> %d, want 5", got)
	}
}

func TestOpenLayout(t *testing.T) {
	t.Parallel()
	s := setup(t)
	for _, d := range []string{"tmp", "incoming", "deferred", "held", "in-progress", "stale",
		"completed/succeeded", "completed/failed", "completed/killed", "corrupt", "agents"} {
		if fi, err := os.Lstat(s.Path(d)); err != nil || !fi.IsDir() {
			t.Errorf("spool lacks %s/: %v", d, err)
		}
	}
	if _, err := job.Open(s.Root); err != nil {
		t.Fatalf("reopening: %v", err)
	}
	// A symlink in place of a state directory is refused.
	root := t.TempDir()
	if err := os.Mkdir(root+"/elsewhere", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root+"/elsewhere", root+"/incoming"); err != nil {
		t.Fatal(err)
	}
	if _, err := job.Open(root); err == nil {
		t.Fatal("Open accepted a symlinked incoming/")
	}
}

func TestOwnerParse(t *testing.T) {
	t.Parallel()
	o := job.NewOwner("agentd/w1", "w1")
	b, _ := json.Marshal(o)
	got, err := job.ParseOwner(b)
	if err != nil || got.PID != os.Getpid() || got.Token != o.Token || got.BootID == "" || got.StartTime == 0 {
		t.Fatalf("ParseOwner = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "{", `{"pid":0}`, `{"actor":"x"}`} {
		if _, err := job.ParseOwner([]byte(bad)); err == nil {
			t.Errorf("ParseOwner(%q) = nil error", bad)
		}
	}
	if job.NewOwner("a", "").Token == o.Token {
		t.Error("tokens repeat")
	}
}
