package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/farro-dev/farro/pkg/job"
)

// TestFarroctl builds the binary and checks the operator contract from
// outside, as an operator's shell would see it.
func TestFarroctl(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "farroctl")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r := runner{bin: bin}

	t.Run("flags after the arguments", func(t *testing.T) {
		spool := newSpool(t)
		// --spool itself may follow the command, and flags with values
		// may follow the prompt FILE ("-": stdin).
		res := r.run(t, "", `{}`, "submit", "-", "--kind", "noop", "--id", "late", "--spool", spool)
		if res.code != 0 || strings.TrimSpace(res.stdout) != "late" {
			t.Fatalf("submit with flags after FILE: %+v", res)
		}
		res = r.run(t, spool, "", "history", "late", "--json")
		if res.code != 0 || !strings.HasPrefix(res.stdout, "{") {
			t.Fatalf("history ID --json: %+v", res)
		}
		res = r.run(t, spool, "", "cancel", "late", "--reason", "not needed")
		if res.code != 0 || !strings.Contains(res.stdout, "cancelled: not needed") {
			t.Fatalf("cancel ID --reason R: %+v", res)
		}
		// "--" ends the flags: what follows is an argument, refused as an ID.
		res = r.run(t, spool, "", "show", "--", "--json")
		if res.code != 2 || !oneErrorLine(res.stderr) {
			t.Fatalf("show -- --json: %+v; want --json taken as an (invalid) ID", res)
		}
		// A duration flag's bad value says what it takes; a missing job is
		// named once.
		res = r.run(t, spool, "", "top", "--interval", "1")
		if res.code != 2 || !strings.Contains(res.stderr, "such as 1s") {
			t.Fatalf("top --interval 1: %+v", res)
		}
		res = r.run(t, spool, "", "cancel", "nosuchjob")
		if res.code != 1 || strings.Count(res.stderr, "nosuchjob") != 1 {
			t.Fatalf("cancel nosuchjob: %+v; want the ID named once", res)
		}
		res = r.run(t, "", "", "hold", "--help")
		if !strings.Contains(res.stdout, "held by operator: NOTE") {
			t.Fatalf("hold --help: the --reason text is not hold's:\n%s", res.stdout)
		}
	})

	t.Run("help and version", func(t *testing.T) {
		for _, args := range [][]string{{"--help"}, {"--version"}, {"submit", "--help"}, {"fsck", "--help"}} {
			res := r.run(t, "", "", args...)
			if res.code != 0 || res.stdout == "" {
				t.Errorf("%v: %+v", args, res)
			}
		}
		if res := r.run(t, "", "", "--version"); !strings.Contains(res.stdout, "farroctl version") {
			t.Errorf("version: %q", res.stdout)
		}
	})

	t.Run("usage errors exit 2 with one line", func(t *testing.T) {
		spool := newSpool(t)
		for _, args := range [][]string{{}, {"bogus"}, {"submit", "--bogus"}, {"ls", "--state", "nope"}, {"hold"}, {"show"}} {
			res := r.run(t, spool, "", args...)
			if res.code != 2 || !oneErrorLine(res.stderr) {
				t.Errorf("%v: %+v", args, res)
			}
		}
	})

	t.Run("submit prints only the id", func(t *testing.T) {
		spool := newSpool(t)
		res := r.run(t, spool, `{"cmd":"x"}`, "submit")
		id := strings.TrimSuffix(res.stdout, "\n")
		if res.code != 0 || res.stderr != "" || job.ValidateID(id) != nil || res.stdout != id+"\n" {
			t.Fatalf("%+v", res)
		}
		res = r.run(t, spool, `{}`, "submit", "--id", "mine", "--kind", "noop", "--priority", "3", "--max-attempts", "2", "-")
		if res.code != 0 || res.stdout != "mine\n" || res.stderr != "" {
			t.Fatalf("%+v", res)
		}
		if _, err := os.Stat(filepath.Join(spool, "incoming", "mine", "job.json")); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "p.json")
		if err := os.WriteFile(file, []byte(`{"from":"file"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		res = r.run(t, spool, "", "submit", "--id", "fromfile", "--in", "1h", file)
		if res.code != 0 || res.stdout != "fromfile\n" {
			t.Fatalf("%+v", res)
		}
		if _, err := os.Stat(filepath.Join(spool, "deferred", "fromfile", "prompt.json")); err != nil {
			t.Fatal(err)
		}
		// FARRO_SPOOL works like --spool.
		cmd := exec.Command(bin, "submit", "--id", "viaenv")
		cmd.Env = append(os.Environ(), "FARRO_SPOOL="+spool)
		cmd.Stdin = strings.NewReader("{}")
		if out, err := cmd.Output(); err != nil || string(out) != "viaenv\n" {
			t.Fatalf("FARRO_SPOOL: %q %v", out, err)
		}
	})

	t.Run("refusals create nothing", func(t *testing.T) {
		spool := newSpool(t)
		if res := r.run(t, spool, `{}`, "submit", "--id", "taken"); res.code != 0 {
			t.Fatalf("%+v", res)
		}
		big := `{"a":"` + strings.Repeat("x", job.MaxPromptSize) + `"}`
		for _, tc := range []struct {
			name  string
			stdin string
			args  []string
			code  int
		}{
			{"duplicate", `{}`, []string{"submit", "--id", "taken"}, 1},
			{"unsafe id", `{}`, []string{"submit", "--id", "../../etc"}, 2},
			{"cancel unsafe id", ``, []string{"cancel", "taken", "a/../b"}, 2},
			{"show unsafe id", ``, []string{"show", "../../etc"}, 2},
			{"invalid json", `{"a"`, []string{"submit"}, 2},
			{"over 1 MiB", big, []string{"submit"}, 2},
			{"empty", ``, []string{"submit"}, 2},
		} {
			before := tree(t, spool)
			res := r.run(t, spool, tc.stdin, tc.args...)
			if res.code != tc.code || res.stdout != "" || !oneErrorLine(res.stderr) {
				t.Errorf("%s: %+v", tc.name, res)
			}
			if after := tree(t, spool); after != before {
				t.Errorf("%s: spool changed:\n%s\n---\n%s", tc.name, before, after)
			}
		}
	})

	t.Run("concurrent submits of one id: exactly one wins", func(t *testing.T) {
		spool := newSpool(t)
		for round := 0; round < 5; round++ {
			id := fmt.Sprintf("race-%d", round)
			const n = 6
			results := make([]result, n)
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					results[i] = r.run(t, spool, fmt.Sprintf(`{"writer":%d}`, i), "submit", "--id", id)
				}(i)
			}
			wg.Wait()
			wins := 0
			for _, res := range results {
				switch {
				case res.code == 0 && res.stdout == id+"\n":
					wins++
				case res.code == 1 && res.stdout == "" && oneErrorLine(res.stderr) && strings.Contains(res.stderr, "exists"):
				default:
					t.Errorf("round %d: %+v", round, res)
				}
			}
			if wins != 1 {
				t.Fatalf("round %d: %d winners", round, wins)
			}
			s := &job.Spool{Root: spool}
			if locs, err := s.Locate(id); err != nil || len(locs) != 1 {
				t.Fatalf("round %d: %v %v", round, locs, err)
			}
		}
		if entries, _ := os.ReadDir(filepath.Join(spool, "tmp")); len(entries) != 0 {
			t.Errorf("tmp/ leftovers: %v", entries)
		}
		if locks, _ := filepath.Glob(filepath.Join(spool, "incoming", "*.lock")); len(locks) != 0 {
			t.Errorf("locks left: %v", locks)
		}
	})

	t.Run("ls show stats and actions", func(t *testing.T) {
		spool := newSpool(t)
		for _, id := range []string{"a", "b", "c"} {
			if res := r.run(t, spool, `{}`, "submit", "--id", id); res.code != 0 {
				t.Fatalf("%+v", res)
			}
		}
		res := r.run(t, spool, "", "hold", "a", "b")
		if res.code != 0 || len(strings.Split(strings.TrimSpace(res.stdout), "\n")) != 2 {
			t.Fatalf("hold: %+v", res)
		}
		if res := r.run(t, spool, "", "release", "b"); res.code != 0 {
			t.Fatalf("release: %+v", res)
		}
		if res := r.run(t, spool, "", "cancel", "--reason", "not needed", "c"); res.code != 0 {
			t.Fatalf("cancel: %+v", res)
		}
		res = r.run(t, spool, "", "kill", "a", "missing")
		if res.code != 1 || !strings.HasPrefix(res.stdout, "a: ") || !oneErrorLine(res.stderr) || !strings.Contains(res.stderr, "missing") {
			t.Fatalf("kill: %+v", res)
		}

		res = r.run(t, spool, "", "ls", "--json")
		if res.code != 0 {
			t.Fatalf("ls: %+v", res)
		}
		status := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("ls line %q: %v", l, err)
			}
			for _, f := range []string{"id", "status", "attempts", "max_attempts", "priority", "agent", "updated_at", "dir"} {
				if _, ok := m[f]; !ok {
					t.Errorf("ls line lacks %s: %s", f, l)
				}
			}
			status[m["id"].(string)] = m["status"].(string) + "|" + m["reason"].(string)
		}
		want := map[string]string{"a": "killed|killed by operator", "b": "queued|released by operator", "c": "killed|cancelled: not needed"}
		for id, w := range want {
			if status[id] != w {
				t.Errorf("%s: %q, want %q", id, status[id], w)
			}
		}
		if res := r.run(t, spool, "", "ls"); res.code != 0 || !strings.HasPrefix(res.stdout, "ID ") {
			t.Errorf("ls table: %+v", res)
		}

		res = r.run(t, spool, "", "show", "c")
		var doc map[string]any
		if res.code != 0 || json.Unmarshal([]byte(res.stdout), &doc) != nil || doc["location"] != "killed" || doc["status"] != "killed" {
			t.Fatalf("show: %+v", res)
		}
		if res := r.run(t, spool, "", "show", "nope"); res.code != 1 || res.stdout != "" || !oneErrorLine(res.stderr) {
			t.Errorf("show missing: %+v", res)
		}

		res = r.run(t, spool, "", "stats", "--json")
		var st struct {
			States map[string]int `json:"states"`
		}
		if res.code != 0 || json.Unmarshal([]byte(res.stdout), &st) != nil || st.States["killed"] != 2 || st.States["queued"] != 1 || len(st.States) != 8 {
			t.Fatalf("stats: %+v", res)
		}
		if res := r.run(t, spool, "", "stats"); res.code != 0 || !strings.Contains(res.stdout, "oldest queued") {
			t.Errorf("stats table: %+v", res)
		}

		res = r.run(t, spool, "", "stats", "--ages", "--json")
		var ages map[string]struct {
			Total      int `json:"total"`
			Unreadable int `json:"unreadable"`
			Buckets    []struct {
				LE    *float64 `json:"le_seconds"`
				Count int      `json:"count"`
			} `json:"buckets"`
		}
		if res.code != 0 || json.Unmarshal([]byte(res.stdout), &ages) != nil || len(ages) != 8 || ages["killed"].Total != 2 ||
			ages["queued"].Total != 1 || len(ages["queued"].Buckets) != 10 || ages["queued"].Buckets[0].Count != 1 || ages["queued"].Buckets[9].LE != nil {
			t.Fatalf("stats --ages --json: %+v", res)
		}
		res = r.run(t, spool, "", "stats", "--ages")
		if ls := strings.Split(strings.TrimSpace(res.stdout), "\n"); res.code != 0 || len(ls) != 10 || !strings.HasPrefix(ls[0], "STATE") ||
			!strings.Contains(ls[0], "640m+") || !strings.HasPrefix(ls[9], "TOTAL") {
			t.Errorf("stats --ages table: %+v", res)
		}
		if res := r.run(t, spool, "", "stats", "--ages", "extra"); res.code != 2 || !oneErrorLine(res.stderr) {
			t.Errorf("stats --ages extra: %+v", res)
		}
	})

	t.Run("retry and rm of finished jobs", func(t *testing.T) {
		spool := newSpool(t)
		for _, id := range []string{"k", "q"} {
			if res := r.run(t, spool, `{}`, "submit", "--id", id); res.code != 0 {
				t.Fatalf("%+v", res)
			}
		}
		if res := r.run(t, spool, "", "cancel", "k"); res.code != 0 {
			t.Fatalf("cancel: %+v", res)
		}
		res := r.run(t, spool, "", "retry", "k", "q")
		if res.code != 1 || res.stdout != "k: killed -> queued (retried: attempts reset)\n" || !oneErrorLine(res.stderr) || !strings.Contains(res.stderr, "q: is queued") {
			t.Fatalf("retry: %+v", res)
		}
		if res := r.run(t, spool, "", "retry", "--succeeded", "a/../b"); res.code != 2 {
			t.Fatalf("retry of an unsafe ID: %+v", res)
		}
		if res := r.run(t, spool, "", "rm", "k"); res.code != 1 || !strings.Contains(res.stderr, "not terminal") {
			t.Fatalf("rm of a queued job: %+v", res)
		}
		if res := r.run(t, spool, "", "kill", "k"); res.code != 0 {
			t.Fatalf("kill: %+v", res)
		}
		if res := r.run(t, spool, "", "rm", "k"); res.code != 0 || res.stdout != "k: killed -> removed\n" {
			t.Fatalf("rm: %+v", res)
		}
		if res := r.run(t, spool, "", "show", "k"); res.code != 1 {
			t.Fatalf("show after rm: %+v", res)
		}
		for _, cmd := range []string{"retry", "rm"} {
			if res := r.run(t, spool, "", cmd, "--help"); res.code != 0 || !strings.Contains(res.stdout, "ID...") {
				t.Errorf("%s --help: %+v", cmd, res)
			}
		}
		if res := r.run(t, spool, "", "man"); res.code != 0 || !strings.Contains(res.stdout, "retry") || !strings.Contains(res.stdout, "rm") {
			t.Errorf("man page lacks retry or rm")
		}
		if res := r.run(t, spool, "", "completion", "bash"); res.code != 0 || !strings.Contains(res.stdout, "retry") {
			t.Errorf("bash completion lacks retry: %+v", res.code)
		}
	})

	t.Run("cancel a running job writes control.json", func(t *testing.T) {
		spool := newSpool(t)
		s, err := job.Open(spool)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Submit(job.SubmitRequest{ID: "run", Kind: "noop", Prompt: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim("run", job.Holder{Actor: "agentd/w1", Agent: "w1"}); err != nil {
			t.Fatal(err)
		}
		res := r.run(t, spool, "", "cancel", "run")
		if res.code != 0 || !strings.Contains(res.stdout, "requested") {
			t.Fatalf("%+v", res)
		}
		c, err := job.ReadControl(s.JobDir(job.InProgress, "w1", "run"))
		if err != nil || c == nil || c.Action != job.ControlCancel || c.Actor != "farroctl" {
			t.Fatalf("control %+v %v", c, err)
		}
	})

	t.Run("fsck", func(t *testing.T) {
		spool := newSpool(t)
		if res := r.run(t, spool, `{}`, "submit", "--id", "ok"); res.code != 0 {
			t.Fatalf("%+v", res)
		}
		if res := r.run(t, spool, "", "fsck"); res.code != 0 || res.stderr != "" {
			t.Fatalf("clean: %+v", res)
		}
		if err := os.MkdirAll(filepath.Join(spool, "tmp", "lost.1"), 0o755); err != nil {
			t.Fatal(err)
		}
		before := tree(t, spool)
		res := r.run(t, spool, "", "fsck", "--grace", "0s")
		if res.code != 1 || !strings.Contains(res.stdout, "tmp-leftover") || !oneErrorLine(res.stderr) {
			t.Fatalf("plan: %+v", res)
		}
		if tree(t, spool) != before {
			t.Fatal("fsck without --repair changed the spool")
		}
		res = r.run(t, spool, "", "fsck", "--grace", "0s", "--repair", "--json")
		if res.code != 0 || !strings.Contains(res.stdout, `"repaired":true`) {
			t.Fatalf("repair: %+v", res)
		}
		if _, err := os.Stat(filepath.Join(spool, "tmp", "lost.1")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("leftover: %v", err)
		}
	})
}

type runner struct{ bin string }

type result struct {
	code           int
	stdout, stderr string
}

// run runs farroctl with --spool spool (when not empty) and stdin.
func (r runner) run(t *testing.T, spool, stdin string, args ...string) result {
	t.Helper()
	if spool != "" {
		args = append([]string{"--spool", spool}, args...)
	}
	cmd := exec.Command(r.bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "FARRO_SPOOL=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func newSpool(t *testing.T) string {
	t.Helper()
	spool := filepath.Join(t.TempDir(), "spool")
	if _, err := job.Open(spool); err != nil {
		t.Fatal(err)
	}
	return spool
}

// oneErrorLine reports whether s is exactly one "farroctl: ..." line.
func oneErrorLine(s string) bool {
	return strings.HasPrefix(s, "farroctl: ") && strings.Count(s, "\n") == 1 && strings.HasSuffix(s, "\n")
}

// tree lists every path below root (files with size and mtime), so that
// creations, removals and rewrites show.
func tree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		line := fmt.Sprintf("%s %s", rel, info.Mode())
		if info.Mode().IsRegular() {
			line += fmt.Sprintf(" %d %d", info.Size(), info.ModTime().UnixNano())
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
