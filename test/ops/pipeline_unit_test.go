package ops

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/internal/testbin"
)

// unitCommand returns the argv of a unit's ExecStart=, with
// $FARRO_PIPELINE_ARGS expanded to nothing (the unit's default) and
// /usr/bin/ pointing at the binaries under test.
func unitCommand(t *testing.T, unit string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testbin.Root(), "deploy", "systemd", unit))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		cmd, ok := strings.CutPrefix(line, "ExecStart=")
		if !ok {
			continue
		}
		var argv []string
		for _, f := range strings.Fields(cmd) {
			if f == "$FARRO_PIPELINE_ARGS" {
				continue
			}
			if p, ok := strings.CutPrefix(f, "/usr/bin/"); ok {
				f = filepath.Join(binaries(t), p)
			}
			argv = append(argv, f)
		}
		return argv
	}
	t.Fatalf("%s has no ExecStart=", unit)
	return nil
}

// TestPipelineUnitLogsJSONLines runs farro-pipeline.service's command
// line with the real farroctl: every line it prints is one JSON object in
// the daemons' log format (timestamp, level, app, actor, message; no key
// twice), with a line per check, a warning per unreadable source file and
// a summary carrying duration_ms; nothing else reaches the journal.
func TestPipelineUnitLogsJSONLines(t *testing.T) {
	t.Parallel()
	argv := unitCommand(t, "farro-pipeline.service")
	if !strings.Contains(strings.Join(argv, " "), " --log-json") {
		t.Fatalf("farro-pipeline.service does not pass --log-json: %q", argv)
	}
	dir := t.TempDir()
	spool := initSpool(t, dir)
	farroctl(t, spool, "", "source", "add", "http://127.0.0.1:9/feed", "--name", "feed", "--allow-private")
	if err := os.WriteFile(filepath.Join(spool, "sources", "broken.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "FARRO_SPOOL="+spool, "JOURNAL_STREAM=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatal(err)
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit %d with an unreadable source file, want 1", code)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr is not empty: %q", stderr.String())
	}
	byMsg := map[string]map[string]any{}
	sc := bufio.NewScanner(&stdout)
	n := 0
	for sc.Scan() {
		n++
		if err := logxtest.CheckLine(sc.Bytes()); err != nil {
			t.Fatalf("line %d: %v: %s", n, err, sc.Text())
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"timestamp", "level", "app", "actor", "message"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d has no %s: %s", n, k, sc.Text())
			}
		}
		if m["app"] != "farro" || m["actor"] != "farroctl/pipeline" {
			t.Errorf("line %d: app %v, actor %v: %s", n, m["app"], m["actor"], sc.Text())
		}
		byMsg[m["message"].(string)] = m
	}
	chk := byMsg["source check"]
	if chk == nil || chk["source"] != "feed" || chk["status"] != "submitted" || !strings.HasPrefix(chk["job_id"].(string), "sc-feed-") || chk["level"] != "info" {
		t.Errorf("no check line for source feed: %v", byMsg)
	}
	if bad := byMsg["unreadable source file"]; bad == nil || bad["level"] != "warn" || !strings.Contains(bad["file"].(string), "broken") {
		t.Errorf("no warning for the unreadable source file: %v", byMsg)
	}
	sum := byMsg["pipeline run done"]
	if sum == nil || sum["checks"] != 1.0 || sum["unreadable_sources"] != 1.0 || sum["level"] != "error" {
		t.Fatalf("summary line: %v", sum)
	}
	if _, ok := sum["duration_ms"].(float64); !ok {
		t.Errorf("summary line has no duration_ms: %v", sum)
	}
}
