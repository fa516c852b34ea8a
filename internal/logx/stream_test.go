package logx_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/pkg/job"
)

func keys(t *testing.T, line []byte) map[string]any {
	t.Helper()
	if err := logxtest.CheckLine(line); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A stream line of a transition has exactly the keys (and the values) of
// the daemon's log line for it: a shipper parses both alike.
func TestStreamLineMatchesTransitionLine(t *testing.T) {
	t.Parallel()
	s, err := job.Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(job.SubmitRequest{ID: "j1", Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim("j1", job.Holder{Actor: "agentd/w1", Agent: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(job.Failed, "exit 2", nil); err != nil {
		t.Fatal(err)
	}
	j := c.Envelope().Lifecycle
	var buf bytes.Buffer
	logx.Transition(logx.New(&buf, "agentd/w1", ""), j, job.InProgress)
	logLine := keys(t, bytes.TrimSpace(buf.Bytes()))

	names, _ := s.StreamSegments()
	data, err := os.ReadFile(s.Path(job.StreamDir, names[len(names)-1]))
	if err != nil {
		t.Fatal(err)
	}
	var last []byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		last = append([]byte(nil), sc.Bytes()...)
	}
	streamLine := keys(t, last)
	var lk, sk []string
	for k := range logLine {
		lk = append(lk, k)
	}
	for k := range streamLine {
		sk = append(sk, k)
	}
	slices.Sort(lk)
	slices.Sort(sk)
	if strings.Join(lk, ",") != strings.Join(sk, ",") {
		t.Fatalf("keys differ:\n log    %v\n stream %v", lk, sk)
	}
	for _, k := range lk {
		if k == "timestamp" {
			continue
		}
		lv, _ := json.Marshal(logLine[k])
		sv, _ := json.Marshal(streamLine[k])
		if string(lv) != string(sv) {
			t.Errorf("%s: log %s, stream %s", k, lv, sv)
		}
	}
}

// A daemon logs a lost stream line as one strict warning.
func TestStreamWarn(t *testing.T) {
	t.Parallel()
	buf := logxtest.New(t)
	root := filepath.Join(t.TempDir(), "spool")
	s, err := job.Open(root, logx.StreamWarn(logx.New(buf, "agentd/w1", "")))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path(job.StreamDir), nil, 0o644); err != nil { // a file where events/ should be
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Submit(job.SubmitRequest{ID: id, Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	lines := buf.Lines(t)
	if len(lines) != 1 || lines[0]["level"] != "warn" || lines[0]["lost_lines"] != float64(1) || lines[0]["message"] != "event stream line not written" {
		t.Fatalf("lines %v", lines)
	}
}
