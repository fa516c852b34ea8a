package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
)

// The procedure of docs/POSTGRES.md, "Moving a queue from a spool", on a
// spool with jobs in every state: stop submits, pause the kinds, drain
// the agent (its running job released to queued), export, migrate and
// import into the database; then farroctl stats shows the same counts on
// both, and farroctl history the same transitions for every job.
func TestExportImportProcedure(t *testing.T) {
	url := testpg.NewDatabase(t, testpg.Start(t))
	spool := filepath.Join(t.TempDir(), "spool")
	t.Setenv("FARRO_STORE", "")
	t.Setenv("FARRO_SPOOL", spool)
	must := func(stdin string, args ...string) string {
		t.Helper()
		code, stdout, stderr := farroctlIn(stdin, args...)
		if code != 0 {
			t.Fatalf("farroctl %v: exit %d, %q %q", args, code, stdout, stderr)
		}
		return stdout
	}
	must("", "init", spool)
	for _, sub := range [][]string{
		{"--id", "q1", "--priority", "5"}, {"--id", "q2", "--kind", "exec"}, {"--id", "d1", "--in", "1h"}, {"--id", "h1", "--held"},
		{"--id", "r1"}, {"--id", "s1"}, {"--id", "f1"}, {"--id", "ok1"}, {"--id", "k1"},
	} {
		must(`{"n": 1, "s": "<&>"}`, append([]string{"submit", "--kind", "noop"}, sub...)...)
	}
	must("", "cancel", "k1")
	s, err := job.Open(spool)
	if err != nil {
		t.Fatal(err)
	}
	h := job.Holder{Actor: "agentd/a1", Agent: "a1"}
	claim := func(id string) *job.Claimed {
		c, err := s.Claim(id, h)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := claim("f1").Commit(job.Failed, "exit 1", nil); err != nil {
		t.Fatal(err)
	}
	if err := claim("ok1").Commit(job.Succeeded, "", nil); err != nil {
		t.Fatal(err)
	}
	claim("s1")
	if _, err := s.RecoverLock("s1", "watchdogd", "agent a1 died"); err != nil {
		t.Fatal(err)
	}
	running := claim("r1")

	// The drain: no new submits, the kinds paused, the agent stopped with
	// --drain (its running job released to queued, no attempt counted).
	must("", "pause", "noop", "--reason", "moving to PostgreSQL")
	must("", "pause", "exec", "--reason", "moving to PostgreSQL")
	if err := running.Commit(job.Queued, "released: agent shut down before the job finished", func(j *job.Job) {
		j.Attempts--
		j.Agent, j.StartedAt, j.LastHeartbeat = "", nil, nil
	}); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "queue.jsonl")
	if out := must("", "export", "-o", file); out != "exported 9 job(s) to "+file+"\n" {
		t.Errorf("export said %q", out)
	}
	must("", "migrate", "--store", url)
	if out := must("", "import", "--store", url, file); out != "imported 9, already there 0, conflicts 0, refused lines 0\n" {
		t.Errorf("import said %q", out)
	}

	type stats struct {
		States map[string]int `json:"states"`
		Total  int            `json:"total"`
	}
	var onSpool, onDB stats
	if err := json.Unmarshal([]byte(must("", "stats", "--json")), &onSpool); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(must("", "stats", "--json", "--store", url)), &onDB); err != nil {
		t.Fatal(err)
	}
	if onSpool.Total != 9 || !reflect.DeepEqual(onSpool, onDB) {
		t.Errorf("stats: spool %+v, database %+v", onSpool, onDB)
	}
	for _, st := range job.States {
		if want := map[job.State]int{job.Queued: 3, job.InProgress: 0}[st]; st != job.Queued && st != job.InProgress && onDB.States[string(st)] != 1 || (st == job.Queued || st == job.InProgress) && onDB.States[string(st)] != want {
			t.Errorf("%s: %d jobs", st, onDB.States[string(st)])
		}
	}
	for _, id := range []string{"q1", "q2", "d1", "h1", "r1", "s1", "f1", "ok1", "k1"} {
		a, b := events(t, must("", "history", "--json", id)), events(t, must("", "history", "--json", id, "--store", url))
		if len(a) < 1 || !reflect.DeepEqual(a, b) {
			t.Errorf("%s: history on the spool\n%v\non the database\n%v", id, a, b)
		}
	}

	// From that database to another: export --store, import; the second
	// database's export is the first's, line for line (but for the time
	// of the export), and a running job's line says so.
	url2 := testpg.NewDatabase(t, testpg.Start(t))
	must("", "migrate", "--store", url2)
	file2, file3 := filepath.Join(t.TempDir(), "db1.jsonl"), filepath.Join(t.TempDir(), "db2.jsonl")
	if out := must("", "export", "--store", url, "-o", file2); out != "exported 9 job(s) to "+file2+"\n" {
		t.Errorf("export of the database said %q", out)
	}
	if out := must("", "import", "--store", url2, file2); out != "imported 9, already there 0, conflicts 0, refused lines 0\n" {
		t.Errorf("import into the second database said %q", out)
	}
	must("", "export", "--store", url2, "-o", file3)
	lines := func(path string) []map[string]any {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%s: %q: %v", path, l, err)
			}
			delete(m, "exported_at")
			out = append(out, m)
		}
		return out
	}
	a, b := lines(file2), lines(file3)
	if len(a) != 9 || !reflect.DeepEqual(a, b) {
		t.Errorf("export of the first database\n%v\nof the second\n%v", a, b)
	}
	for _, m := range a {
		if m["prompt"] != `{"n": 1, "s": "<&>"}` || len(m["history"].([]any)) < 1 {
			t.Errorf("line of %v: prompt %v, history %v", m["id"], m["prompt"], m["history"])
		}
	}
	// Only the states asked for.
	if out := must("", "export", "--store", url, "--state", "queued,held"); strings.Count(out, "\n") != 4 {
		t.Errorf("export --state queued,held of the database: %q", out)
	}
}

// events parses history --json's lines, times to the microsecond (the
// database's precision).
func events(t *testing.T, out string) []job.Event {
	t.Helper()
	var evs []job.Event
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev job.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("history line %q: %v", l, err)
		}
		ev.Time = ev.Time.UTC().Truncate(time.Microsecond)
		evs = append(evs, ev)
	}
	return evs
}

// export reads a spool and refuses a database; import writes a database
// and refuses a spool; each takes what it says.
func TestExportImportWiring(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "spool")
	t.Setenv("FARRO_SPOOL", spool)
	t.Setenv("FARRO_STORE", "")
	if code, _, stderr := farroctlIn("", "init", spool); code != 0 {
		t.Fatal(stderr)
	}
	db := "postgres://nobody@127.0.0.1:1/none?connect_timeout=5"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "extra"}, "farroctl: export takes no arguments"},
		{[]string{"export", "--state", "nosuch"}, `farroctl: unknown state "nosuch"`},
		{[]string{"import", "-"}, "farroctl: import needs a PostgreSQL store: --store postgres://"},
		{[]string{"import", "--store", db, "a", "b"}, "farroctl: import takes at most one FILE, got 2"},
	} {
		code, stdout, stderr := farroctlIn("", tc.args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, tc.want) {
			t.Errorf("farroctl %v: exit %d, %q %q", tc.args, code, stdout, stderr)
		}
	}
	if code, stdout, stderr := farroctlIn("", "import", "--store", db, filepath.Join(t.TempDir(), "none.jsonl")); code != 1 || stdout != "" || !strings.Contains(stderr, "no such file") {
		t.Errorf("import of a missing file: exit %d, %q %q", code, stdout, stderr)
	}
	if code, stdout, stderr := farroctlIn("", "import", "--store", db); code != 1 || !strings.HasPrefix(stderr, "farroctl: import: 127.0.0.1:1/none: ") {
		t.Errorf("import into an unreachable database: exit %d, %q %q", code, stdout, stderr)
	}
	noFile := filepath.Join(t.TempDir(), "none.jsonl")
	if code, stdout, stderr := farroctlIn("", "export", "--store", db, "-o", noFile); code != 1 || stdout != "" || !strings.HasPrefix(stderr, "farroctl: 127.0.0.1:1/none: ") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("export of an unreachable database: exit %d, %q %q", code, stdout, stderr)
	}
	if _, err := os.Stat(noFile); !os.IsNotExist(err) {
		t.Errorf("a failed export left its file: %v", err)
	}
	if code, stdout, stderr := farroctlIn("", "export"); code != 0 || stdout != "" || stderr != "" {
		t.Errorf("export of an empty spool: exit %d, %q %q", code, stdout, stderr)
	}
	out := filepath.Join(t.TempDir(), "q.jsonl")
	if code, stdout, stderr := farroctlIn("", "export", "--output", out); code != 0 || stdout != "exported 0 job(s) to "+out+"\n" {
		t.Errorf("export --output: exit %d, %q %q", code, stdout, stderr)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() != 0 {
		t.Errorf("export of an empty spool to a file: %v", err)
	}
	// With FARRO_STORE naming a database, --store SPOOL_DIR exports the spool.
	t.Setenv("FARRO_STORE", db)
	if code, stdout, stderr := farroctlIn("", "export", "--store", spool); code != 0 || stdout != "" || stderr != "" {
		t.Errorf("export --store DIR over FARRO_STORE: exit %d, %q %q", code, stdout, stderr)
	}
}
