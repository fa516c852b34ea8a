package ctl_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/pkg/job"
)

// mixed builds a spool with jobs in several states.
func mixed(t *testing.T) *env {
	e := newEnv(t)
	e.submit("q-low", func(r *job.SubmitRequest) { r.Priority = 1 })
	e.submit("q-high", func(r *job.SubmitRequest) { r.Priority = 9; r.MaxAttempts = 4 })
	e.submit("later", func(r *job.SubmitRequest) { r.NotBefore = time.Now().Add(time.Hour) })
	e.submit("paused", func(r *job.SubmitRequest) { r.Held = true })
	e.claim("run")
	e.failed("bad")
	return e
}

func TestListJSON(t *testing.T) {
	e := mixed(t)
	if err := e.ctl("").List(ctl.ListOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	var order []string
	for _, l := range lines(e.stdout.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		for _, f := range []string{"id", "status", "location", "kind", "attempts", "max_attempts", "priority", "agent", "updated_at", "created_at", "reason", "dir"} {
			if _, ok := m[f]; !ok {
				t.Errorf("line %q lacks %s", l, f)
			}
		}
		id := m["id"].(string)
		got[id], order = m, append(order, id)
	}
	want := map[string]string{"q-low": "queued", "q-high": "queued", "later": "deferred", "paused": "held", "run": "in-progress", "bad": "failed"}
	if len(got) != len(want) {
		t.Fatalf("ids %v", order)
	}
	for id, st := range want {
		if got[id]["status"] != st || got[id]["location"] != st {
			t.Errorf("%s: %v", id, got[id])
		}
	}
	if order[0] != "q-high" || order[1] != "q-low" {
		t.Errorf("incoming not in claim order: %v", order)
	}
	if r := got["run"]; r["agent"] != "t1" || r["attempts"] != 1.0 || !strings.HasSuffix(r["dir"].(string), "in-progress/t1/run") {
		t.Errorf("run: %v", r)
	}
	if r := got["q-high"]; r["max_attempts"] != 4.0 || r["priority"] != 9.0 {
		t.Errorf("q-high: %v", r)
	}
	if r := got["bad"]; r["reason"] != "exit 1" {
		t.Errorf("bad: %v", r)
	}
}

func TestListStateFilterAndTable(t *testing.T) {
	e := mixed(t)
	if err := e.ctl("").List(ctl.ListOptions{States: []string{"held,in-progress"}, JSON: true}); err != nil {
		t.Fatal(err)
	}
	if ls := lines(e.stdout.String()); len(ls) != 2 || !strings.Contains(ls[0], `"paused"`) || !strings.Contains(ls[1], `"run"`) {
		t.Fatalf("filtered: %q", ls)
	}
	if err := e.ctl("").List(ctl.ListOptions{States: []string{"completed/failed"}}); err != nil {
		t.Fatal(err)
	}
	ls := lines(e.stdout.String())
	if len(ls) != 2 || !strings.HasPrefix(ls[0], "ID") || !strings.HasPrefix(ls[1], "bad ") || !strings.Contains(ls[1], "failed") {
		t.Fatalf("table: %q", ls)
	}
	if err := e.ctl("").List(ctl.ListOptions{States: []string{"running"}}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Fatalf("unknown state: %v", err)
	}
}

func TestListShowsProblems(t *testing.T) {
	e := newEnv(t)
	e.submit("ok", nil)
	writeFile(t, e.s.Path("held", "broken", "job.json"), "{not json")
	if err := os.Symlink("/etc", e.s.Path("incoming", "evil")); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl("").List(ctl.ListOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	out := e.stdout.String()
	if n := len(lines(out)); n != 3 || !strings.Contains(out, `"id":"broken"`) || !strings.Contains(out, `"id":"evil"`) || strings.Count(out, `"problem"`) != 2 {
		t.Fatalf("ls: %s", out)
	}
}

func TestShow(t *testing.T) {
	e := mixed(t)
	if err := e.ctl("").Show([]string{"run"}); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(e.stdout.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, e.stdout)
	}
	if doc["id"] != "run" || doc["status"] != "in-progress" || doc["location"] != "in-progress" || doc["schema_version"] != job.SchemaVersion {
		t.Fatalf("doc: %v", doc)
	}
	if !strings.HasSuffix(doc["dir"].(string), filepath.Join("in-progress", "t1", "run")) {
		t.Errorf("dir %v", doc["dir"])
	}
	lock, _ := doc["lock"].(map[string]any)
	owner, _ := lock["owner"].(map[string]any)
	if owner["actor"] != "agentd/t1" || owner["pid"] != float64(os.Getpid()) || lock["verdict"] != "alive" {
		t.Errorf("lock: %v", doc["lock"])
	}
	if p, _ := doc["prompt"].(map[string]any); p["n"] != 1.0 {
		t.Errorf("prompt: %v", doc["prompt"])
	}

	if err := e.ctl("").Show([]string{"q-low"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.stdout.String(), `"lock": null`) {
		t.Errorf("unlocked job: %s", e.stdout)
	}
	if err := e.ctl("").Show([]string{"nope"}); ctl.ExitCode(err) != ctl.ExitFail || e.stdout.Len() != 0 {
		t.Fatalf("not found: %v, %q", err, e.stdout)
	}
	if err := e.ctl("").Show([]string{"../etc"}); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Fatalf("unsafe id: %v", err)
	}
	if err := e.ctl("").Show(nil); ctl.ExitCode(err) != ctl.ExitUsage {
		t.Fatalf("no id: %v", err)
	}
}

func TestStats(t *testing.T) {
	e := mixed(t)
	if err := os.Mkdir(e.s.Path("tmp", "leftover.1234"), 0o755); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	st, err := ctl.Count(e.s, now.Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := map[job.State]int{job.Queued: 2, job.Deferred: 1, job.Held: 1, job.InProgress: 1, job.Failed: 1,
		job.Stale: 0, job.Succeeded: 0, job.Killed: 0}
	for s, n := range want {
		if st.States[s] != n {
			t.Errorf("%s: %d, want %d", s, st.States[s], n)
		}
	}
	if st.Total != 6 || st.Tmp != 1 || st.Corrupt != 0 || st.Locks != 1 || st.Agents["t1"] != 1 {
		t.Errorf("stats: %+v", st)
	}
	if st.OldestQueuedAge == nil || *st.OldestQueuedAge < 10 || *st.OldestQueuedAge > 20 || st.OldestQueuedID != "q-low" {
		t.Errorf("oldest queued: %v %s", st.OldestQueuedAge, st.OldestQueuedID)
	}

	if err := e.ctl("").Stats(true); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		States map[string]int `json:"states"`
		Age    *float64       `json:"oldest_queued_age_seconds"`
	}
	if err := json.Unmarshal(e.stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.States) != 8 || doc.States["queued"] != 2 || doc.States["killed"] != 0 || doc.Age == nil {
		t.Errorf("stats --json: %s", e.stdout)
	}
	if err := e.ctl("").Stats(false); err != nil || !strings.Contains(e.stdout.String(), "oldest queued") {
		t.Fatalf("stats: %v %s", err, e.stdout)
	}

	empty := newEnv(t)
	if err := empty.ctl("").Stats(true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(empty.stdout.String(), `"oldest_queued_age_seconds":null`) {
		t.Errorf("empty spool: %s", empty.stdout)
	}
}

func TestReadCommandsNeedAnExistingSpool(t *testing.T) {
	root := filepath.Join(t.TempDir(), "missing")
	c := &ctl.Ctl{Root: root, Stdout: &strings.Builder{}, Stderr: &strings.Builder{}}
	for name, err := range map[string]error{
		"ls":     c.List(ctl.ListOptions{}),
		"stats":  c.Stats(false),
		"show":   c.Show([]string{"x"}),
		"fsck":   c.Fsck(ctl.FsckOptions{}),
		"hold":   c.Act(ctl.Hold, []string{"x"}, ctl.ActOptions{}),
		"agents": c.Agents(ctl.AgentsOptions{}),
	} {
		if ctl.ExitCode(err) != ctl.ExitFail {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("spool created: %v", err)
	}
}
