package ctl_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/pkg/job"
)

func TestHistory(t *testing.T) {
	e := newEnv(t)
	e.failed("f1") // submitted, claimed, failed: three events
	if err := e.ctl("").History([]string{"f1"}, ctl.HistoryOptions{}); err != nil {
		t.Fatal(err)
	}
	ls := lines(e.stdout.String())
	if len(ls) != 4 || !strings.HasPrefix(ls[0], "TIME") {
		t.Fatalf("table:\n%s", e.stdout)
	}
	for i, want := range [][]string{{"farroctl", "queued", "submitted"}, {"agentd/t1", "queued", "in-progress"}, {"agentd/t1", "in-progress", "failed", "exit 1"}} {
		for _, w := range want {
			if !strings.Contains(ls[i+1], w) {
				t.Errorf("row %d %q lacks %q", i+1, ls[i+1], w)
			}
		}
	}

	if err := e.ctl("").History([]string{"f1"}, ctl.HistoryOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	ls = lines(e.stdout.String())
	if len(ls) != 3 {
		t.Fatalf("--json: %d lines:\n%s", len(ls), e.stdout)
	}
	var ev job.Event
	if err := json.Unmarshal([]byte(ls[2]), &ev); err != nil || ev.From != job.InProgress || ev.To != job.Failed || ev.Attempt != 1 {
		t.Errorf("last event %+v (%v)", ev, err)
	}

	// A torn last line (a crash mid-append) is reported, not fatal.
	f, err := os.OpenFile(filepath.Join(e.where("f1").Dir, job.EventsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"time":"2026-`)
	f.Close()
	if err := e.ctl("").History([]string{"f1"}, ctl.HistoryOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.stdout.String(), "line 4 unreadable") || !strings.Contains(e.stderr.String(), "1 unreadable line") {
		t.Errorf("torn line not reported:\n%s\n%s", e.stdout, e.stderr)
	}

	for _, c := range []struct {
		args []string
		code int
	}{{nil, ctl.ExitUsage}, {[]string{"a", "b"}, ctl.ExitUsage}, {[]string{"../x"}, ctl.ExitUsage}, {[]string{"nope"}, ctl.ExitFail}} {
		if got := ctl.ExitCode(e.ctl("").History(c.args, ctl.HistoryOptions{})); got != c.code {
			t.Errorf("history %q: exit %d, want %d", c.args, got, c.code)
		}
	}
}

func TestTopSnapshot(t *testing.T) {
	e := newEnv(t)
	e.submit("q1", nil)
	e.submit("q2", nil)
	e.claim("r1")
	e.failed("f1")

	// Not a terminal: one plain snapshot.
	if err := e.ctl("").Top(ctl.TopOptions{}); err != nil {
		t.Fatal(err)
	}
	out := e.stdout.String()
	for _, want := range []string{"farro top", "queued                2", "in-progress           1", "failed                1", "total                 4", "oldest queued:", "t1 (unregistered)  r1", "noop"} {
		if !strings.Contains(out, want) {
			t.Errorf("snapshot lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("escape sequences in a non-terminal snapshot: %q", out)
	}

	if err := e.ctl("").Top(ctl.TopOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	var doc ctl.TopDoc
	if err := json.Unmarshal(e.stdout.Bytes(), &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, e.stdout)
	}
	if doc.States[job.Queued] != 2 || doc.Total != 4 || len(doc.Workers) != 1 || doc.Workers[0].Agent != "t1" ||
		len(doc.Workers[0].Jobs) != 1 || doc.Workers[0].Jobs[0].ID != "r1" || doc.Workers[0].Jobs[0].LastHeartbeat == nil ||
		doc.OldestQueuedAge == nil || doc.Throughput != nil {
		t.Errorf("top --json: %+v", doc)
	}
	if got := ctl.ExitCode(e.ctl("").Top(ctl.TopOptions{Interval: 1})); got != ctl.ExitUsage {
		t.Errorf("--interval 1ns: exit %d, want 2", got)
	}
}

// top shows agents from the registry: a live one even when idle, a gone
// one only while it holds jobs (they wait for watchdogd), and the daemons'
// states; an agent directory left behind by a gone agent is not "idle".
func TestTopUsesTheRegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.claim("held-by-t1") // in-progress/t1/, t1 registered below and gone
	live, err := registry.AcquireAgent(e.s, "w1", registry.Options{Actor: "agentd/w1", Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Release()
	for _, id := range []string{"t1", "w9"} {
		gone, err := registry.AcquireAgent(e.s, id, registry.Options{Actor: "agentd/" + id, Slots: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := gone.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(e.s.AgentDir("w9"), 0o755); err != nil { // left behind, empty
		t.Fatal(err)
	}
	m, err := registry.AcquireDaemon(e.s, "managerd", registry.Options{Actor: "managerd"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Release()

	if err := e.ctl("").Top(ctl.TopOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	var doc ctl.TopDoc
	if err := json.Unmarshal(e.stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range doc.Workers {
		got[w.Agent] = fmt.Sprintf("%s/%d", w.State, len(w.Jobs))
	}
	want := map[string]string{"w1": "live/0", "t1": "gone/1"}
	if fmt.Sprint(got) != fmt.Sprint(want) || doc.GoneIdle != 1 {
		t.Fatalf("workers %v (gone idle %d), want %v and 1 (w9)", got, doc.GoneIdle, want)
	}
	if fmt.Sprint(doc.Daemons) != "[{managerd live} {watchdogd missing}]" {
		t.Fatalf("daemons %v", doc.Daemons)
	}
	if err := e.ctl("").Top(ctl.TopOptions{Once: true}); err != nil {
		t.Fatal(err)
	}
	out := e.stdout.String()
	for _, w := range []string{"WORKERS: 1 live agent(s), 1 job(s) running, 1 gone and idle", "DAEMONS: managerd live · watchdogd missing", "t1 (gone)", "w1  ", "(idle)"} {
		if !strings.Contains(out, w) {
			t.Errorf("top lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "w9") {
		t.Errorf("top lists the gone, empty w9:\n%s", out)
	}
}

// TestMetricsTextfile writes farro.prom and checks it, through the
// Prometheus text parser, against farroctl stats.
func TestMetricsTextfile(t *testing.T) {
	e := newEnv(t)
	e.submit("q1", nil)
	e.submit("h1", func(r *job.SubmitRequest) { r.Held = true })
	e.claim("r1")
	e.failed("f1")
	dir := t.TempDir()
	if err := e.ctl("").Metrics(ctl.MetricsOptions{Textfile: dir}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "farro.prom"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, m := range mfs["farro_jobs"].GetMetric() {
		got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
	}
	stats := statsOf(t, e)
	for _, state := range job.States {
		if got[string(state)] != float64(stats.States[state]) {
			t.Errorf("farro_jobs{state=%q} = %v, stats says %d", state, got[string(state)], stats.States[state])
		}
	}
	if len(got) != len(job.States) {
		t.Errorf("%d states in farro.prom, want %d", len(got), len(job.States))
	}
	if v := mfs["farro_claim_locks"].GetMetric()[0].GetGauge().GetValue(); v != 1 {
		t.Errorf("claim locks %v, want 1 (r1 is running)", v)
	}

	if got := ctl.ExitCode(e.ctl("").Metrics(ctl.MetricsOptions{Textfile: filepath.Join(dir, "missing")})); got != ctl.ExitFail {
		t.Errorf("missing --textfile dir: exit %d, want 1", got)
	}
	if err := e.ctl("").Metrics(ctl.MetricsOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.stdout.String(), `farro_jobs{state="failed"} 1`) {
		t.Errorf("stdout:\n%s", e.stdout)
	}
}

func statsOf(t *testing.T, e *env) ctl.Stats {
	t.Helper()
	if err := e.ctl("").Stats(true); err != nil {
		t.Fatal(err)
	}
	var st ctl.Stats
	if err := json.Unmarshal(e.stdout.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestOlderSchemaReported: a job written by an older farro (another
// schema_version) is left alone and fsck reports it as unknown-schema,
// as for a newer one.
func TestOlderSchemaReported(t *testing.T) {
	e := newEnv(t)
	e.submit("old", nil)
	path := filepath.Join(e.where("old").Dir, job.JobFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), `"schema_version": "`+job.SchemaVersion+`"`, `"schema_version": "0.9.0"`, 1))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = e.ctl("").Fsck(ctl.FsckOptions{JSON: true, Repair: true})
	if ctl.ExitCode(err) != ctl.ExitFail {
		t.Fatalf("fsck --repair: %v, want exit 1 (unknown schema is not repairable)", err)
	}
	if !strings.Contains(e.stdout.String(), `"kind":"unknown-schema","id":"old"`) {
		t.Errorf("fsck output:\n%s", e.stdout)
	}
	if got := e.where("old"); got.State != job.Queued {
		t.Errorf("the old job moved to %s", got.State)
	}
	after, _ := os.ReadFile(path)
	if string(after) != string(b) {
		t.Error("fsck rewrote the old job's job.json")
	}
}
