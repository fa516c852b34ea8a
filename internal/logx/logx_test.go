package logx_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/pkg/job"
)

var tsPattern = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// decode parses buf as exactly one JSON line, strictly.
func decode(t *testing.T, buf *bytes.Buffer) map[string]any {
	t.Helper()
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("want one line, got %q", out)
	}
	if err := logxtest.CheckLine([]byte(strings.TrimSuffix(out, "\n"))); err != nil {
		t.Fatalf("line %q: %v", out, err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("line %q is not JSON: %v", out, err)
	}
	return m
}

func TestTransitionLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := logx.New(&buf, "agentd/w1", "info")
	j := &job.Job{ID: "j1", Kind: "exec", CorrelationID: "j1/1-abc123", Status: job.Succeeded, Attempts: 1, Reason: "exit 0"}
	before := time.Now().UTC().Truncate(time.Millisecond)
	logx.Transition(l, j, job.InProgress)
	after := time.Now().UTC()
	m := decode(t, &buf)

	ts, _ := m["timestamp"].(string)
	if !tsPattern.MatchString(ts) {
		t.Fatalf("timestamp %q is not UTC RFC 3339 with milliseconds", ts)
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || at.Before(before) || at.After(after) {
		t.Fatalf("timestamp %q (%v) outside [%v, %v]", ts, err, before, after)
	}
	want := map[string]any{
		"level": "info", "message": "job status changed", "app": "farro", "actor": "agentd/w1",
		"job_id": "j1", "correlation_id": "j1/1-abc123", "kind": "exec", "reason": "exit 0", "attempt": float64(1),
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
	}
	ev, ok := m["event"].(map[string]any)
	if !ok {
		t.Fatalf("event = %#v, want an object", m["event"])
	}
	if ev["type"] != "state_transition" || ev["from"] != "in-progress" || ev["to"] != "succeeded" {
		t.Fatalf("event = %#v", ev)
	}
}

func TestTransitionLevels(t *testing.T) {
	t.Parallel()
	for st, lvl := range map[job.State]string{
		job.Succeeded: "info", job.Queued: "info", job.Held: "info", job.Deferred: "info", job.InProgress: "info",
		job.Killed: "warn", job.Failed: "warn", job.Stale: "warn",
	} {
		var buf bytes.Buffer
		logx.Transition(logx.New(&buf, "managerd", ""), &job.Job{ID: "j1", Status: st}, job.Queued)
		m := decode(t, &buf)
		if m["level"] != lvl {
			t.Errorf("transition to %s logged at %v, want %s", st, m["level"], lvl)
		}
		if _, ok := m["correlation_id"]; ok {
			t.Errorf("empty correlation id was logged: %v", m)
		}
	}
}

func TestNewLevelsAndForJob(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := logx.New(&buf, "watchdogd", "warn")
	l.Info().Msg("hidden")
	if buf.Len() != 0 {
		t.Fatalf("info logged at level warn: %q", buf.String())
	}
	jl := logx.ForJob(l, &job.Job{ID: "j9", CorrelationID: "j9/2-ffffff"})
	jl.Error().Msg("boom")
	m := decode(t, &buf)
	if m["level"] != "error" || m["message"] != "boom" || m["job_id"] != "j9" || m["correlation_id"] != "j9/2-ffffff" ||
		m["app"] != "farro" || m["actor"] != "watchdogd" {
		t.Fatalf("line = %v", m)
	}

	for _, lvl := range []string{"", "bogus"} {
		buf.Reset()
		l := logx.New(&buf, "a", lvl)
		l.Debug().Msg("hidden")
		l.Info().Msg("shown")
		if m := decode(t, &buf); m["message"] != "shown" {
			t.Fatalf("level %q: %v", lvl, m)
		}
	}
	buf.Reset()
	dl := logx.New(&buf, "a", "debug")
	dl.Debug().Msg("dbg")
	if m := decode(t, &buf); m["level"] != "debug" {
		t.Fatalf("debug level: %v", m)
	}
}

// TestJobLoggerTransitionHasEachKeyOnce: the job's lines and its
// transition lines carry job_id and correlation_id once each, whatever
// the logger ForJob was given carries besides.
func TestJobLoggerTransitionHasEachKeyOnce(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	base := logx.New(&buf, "agentd/w1", "info").With().Str("verdict", "x").Logger()
	j := &job.Job{ID: "j1", Kind: "noop", CorrelationID: "j1/1-abc123", Status: job.InProgress, Attempts: 1}
	jl := logx.ForJob(base, j)
	jl.Info().Msg("about the job")
	if m := decode(t, &buf); m["job_id"] != "j1" || m["correlation_id"] != "j1/1-abc123" || m["verdict"] != "x" {
		t.Fatalf("job line = %v", m)
	}
	buf.Reset()
	jl.Transition(j, job.Queued)
	m := decode(t, &buf)
	if m["job_id"] != "j1" || m["correlation_id"] != "j1/1-abc123" || m["kind"] != "noop" || m["verdict"] != "x" {
		t.Fatalf("transition line = %v", m)
	}
	// What used to happen: Transition on a logger that already has the
	// job's fields writes them twice, and the strict check sees it.
	buf.Reset()
	logx.Transition(jl.Logger, j, job.Queued)
	if k := logxtest.DuplicateKey(bytes.TrimSpace(buf.Bytes())); k != "job_id" {
		t.Fatalf("DuplicateKey = %q on %s", k, buf.String())
	}
}
