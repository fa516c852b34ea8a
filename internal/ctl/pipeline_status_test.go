package ctl_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/pkg/job"
)

func (e *env) addSource(name, url string) {
	e.t.Helper()
	s := source.New(name, url)
	s.AllowPrivate = true
	if err := source.Create(e.s, s, time.Now().UTC()); err != nil {
		e.t.Fatal(err)
	}
}

type statusRow struct {
	Name     string        `json:"name"`
	State    string        `json:"state"`
	CheckJob *ctl.CheckJob `json:"check_job"`
}

// status runs pipeline status --json and returns the row of source name,
// and the table's line for it.
func (e *env) sourceStatus(name string) (statusRow, string) {
	e.t.Helper()
	if err := e.ctl("").PipelineStatus(0, true); err != nil {
		e.t.Fatalf("pipeline status --json: %v %s", err, e.stderr)
	}
	var out struct {
		Sources []statusRow `json:"sources"`
	}
	if err := json.Unmarshal(e.stdout.Bytes(), &out); err != nil {
		e.t.Fatalf("%v: %s", err, e.stdout)
	}
	var row statusRow
	for _, r := range out.Sources {
		if r.Name == name {
			row = r
		}
	}
	if err := e.ctl("").PipelineStatus(0, false); err != nil {
		e.t.Fatal(err)
	}
	for _, l := range strings.Split(e.stdout.String(), "\n") {
		if strings.HasPrefix(l, name+" ") {
			return row, l
		}
	}
	e.t.Fatalf("no row for %s:\n%s", name, e.stdout)
	return row, ""
}

func (e *env) run(mode pipeline.Mode, logJSON bool) error {
	e.t.Helper()
	return e.ctl("").Pipeline(ctl.PipelineOptions{Mode: mode, MaxSources: pipeline.DefaultMaxSources,
		MaxPerDomain: pipeline.DefaultMaxPerDomain, LogJSON: logJSON})
}

// TestPipelineStatusShowsPendingCheck: a due source whose check job is
// queued or running is "checking (job ID queued|running)", not "due"; once
// that job ended without checking (killed) it is due again.
func TestPipelineStatusShowsPendingCheck(t *testing.T) {
	e := newEnv(t)
	e.addSource("feed", "http://127.0.0.1:9/feed")
	if row, line := e.sourceStatus("feed"); row.State != "due" || row.CheckJob != nil || !strings.Contains(line, " due ") {
		t.Fatalf("before a run: %+v %q", row, line)
	}
	if err := e.run(pipeline.ModeRun, false); err != nil {
		t.Fatalf("pipeline run: %v %s", err, e.stderr)
	}
	id := pipeline.CheckJobID("feed", "0", 1)
	row, line := e.sourceStatus("feed")
	if row.State != "checking" || row.CheckJob == nil || row.CheckJob.ID != id || row.CheckJob.State != job.Queued {
		t.Fatalf("queued check: %+v", row)
	}
	if !strings.Contains(line, "checking (job "+id+" queued)") {
		t.Fatalf("queued check, table: %q", line)
	}
	c, err := e.s.Claim(id, holder)
	if err != nil {
		t.Fatal(err)
	}
	row, line = e.sourceStatus("feed")
	if row.State != "checking" || row.CheckJob == nil || row.CheckJob.State != job.InProgress || !strings.Contains(line, "checking (job "+id+" running)") {
		t.Fatalf("running check: %+v %q", row, line)
	}
	if err := c.Commit(job.Killed, "killed by test", nil); err != nil {
		t.Fatal(err)
	}
	if row, line := e.sourceStatus("feed"); row.State != "due" || row.CheckJob != nil || !strings.Contains(line, " due ") {
		t.Fatalf("after its check job was killed: %+v %q", row, line)
	}
}

// TestPipelineRunLogJSON: --log-json prints the daemons' log lines: one
// per check (with its job), one per unreadable source file, a summary with
// the counts and duration_ms, each a strict JSON object with the required
// fields; the problem is not repeated as text on stderr, and the exit
// status still reports it.
func TestPipelineRunLogJSON(t *testing.T) {
	e := newEnv(t)
	e.addSource("feed", "http://127.0.0.1:9/feed")
	e.addSource("other", "http://127.0.0.2:9/x")
	writeFile(t, e.s.Path(source.Dir, "broken.json"), "{")
	err := e.run(pipeline.ModeRun, true)
	if ctl.ExitCode(err) != ctl.ExitFail {
		t.Fatalf("run with an unreadable source: %v, want exit 1", err)
	}
	if e.stderr.Len() != 0 {
		t.Errorf("stderr: %q", e.stderr)
	}
	buf := logxtest.New(t)
	_, _ = buf.Write(e.stdout.Bytes())
	lines := buf.Lines(t)
	checks := map[string]map[string]any{}
	var sum, bad map[string]any
	for _, m := range lines {
		for _, k := range []string{"timestamp", "level", "app", "actor", "message"} {
			if m[k] == nil {
				t.Errorf("no %s: %v", k, m)
			}
		}
		switch m["message"] {
		case "source check":
			checks[m["source"].(string)] = m
		case "unreadable source file":
			bad = m
		case "pipeline run done":
			sum = m
		}
	}
	if len(checks) != 2 || checks["feed"]["job_id"] != pipeline.CheckJobID("feed", "0", 1) || checks["other"]["status"] != "submitted" {
		t.Errorf("check lines: %v", checks)
	}
	if bad == nil || bad["level"] != "warn" || !strings.HasSuffix(bad["file"].(string), "broken.json") {
		t.Errorf("unreadable source line: %v", bad)
	}
	if sum == nil || sum["checks"] != 2.0 || sum["errors"] != 0.0 || sum["unreadable_sources"] != 1.0 || sum["level"] != "error" || sum["duration_ms"] == nil {
		t.Errorf("summary line: %v", sum)
	}
	if len(lines) != 4 {
		t.Errorf("%d lines, want 4:\n%s", len(lines), e.stdout)
	}
	// The table is still what a terminal gets.
	e.addSource("third", "http://127.0.0.3:9/x")
	_ = e.run(pipeline.ModeCheck, false)
	sc := bufio.NewScanner(strings.NewReader(e.stdout.String()))
	sc.Scan()
	if !strings.HasPrefix(sc.Text(), "pipeline check at ") {
		t.Errorf("without --log-json: %q", e.stdout)
	}
}

// TestSourceListAndShowSayChecking: `source ls` and `source show` agree
// with `pipeline status`: a due source whose check job is queued is
// "checking", with the job, not "due".
func TestSourceListAndShowSayChecking(t *testing.T) {
	e := newEnv(t)
	e.addSource("feed", "http://127.0.0.1:9/feed")
	if err := e.run(pipeline.ModeRun, false); err != nil {
		t.Fatalf("pipeline run: %v %s", err, e.stderr)
	}
	id := pipeline.CheckJobID("feed", "0", 1)
	if err := e.ctl("").SourceShow("feed"); err != nil {
		t.Fatalf("source show: %v %s", err, e.stderr)
	}
	var shown statusRow
	if err := json.Unmarshal(e.stdout.Bytes(), &shown); err != nil {
		t.Fatalf("%v: %s", err, e.stdout)
	}
	if shown.State != "checking" || shown.CheckJob == nil || shown.CheckJob.ID != id {
		t.Fatalf("source show: %s", e.stdout)
	}
	if err := e.ctl("").SourceList(true); err != nil {
		t.Fatalf("source ls --json: %v %s", err, e.stderr)
	}
	var listed statusRow
	sc := bufio.NewScanner(strings.NewReader(e.stdout.String()))
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &listed); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
	}
	if listed.Name != "feed" || listed.State != "checking" || listed.CheckJob == nil || listed.CheckJob.State != job.Queued {
		t.Fatalf("source ls --json: %s", e.stdout)
	}
	if err := e.ctl("").SourceList(false); err != nil {
		t.Fatalf("source ls: %v %s", err, e.stderr)
	}
	if !strings.Contains(e.stdout.String(), "checking (job "+id+" queued)") {
		t.Fatalf("source ls table: %s", e.stdout)
	}
}
