// Package ops tests farro's operations tooling end to end, with the real
// binaries: the daemons' metrics endpoints scraped during a run and checked
// against the spool, `farroctl top` driven in a pseudo-terminal, the shell
// completion scripts loaded in bash, the journal priority prefix, and the
// refusal of a non-loopback metrics address.
package ops

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/testbin"

	"github.com/creack/pty"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/pkg/job"
)

// bins are the four programs, built once per test run.
var bins = &testbin.Set{Prefix: "farro-ops-bin-", Pkgs: []string{"./cmd/agentd", "./cmd/managerd", "./cmd/watchdogd", "./cmd/farroctl"}}

func binaries(t *testing.T) string {
	t.Helper()
	return bins.Dir(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	bins.Remove()
	os.Exit(code)
}

// proc is a daemon whose stdout and stderr go to a log file.
type proc struct {
	t   *testing.T
	cmd *exec.Cmd
	log string
}

func start(t *testing.T, dir, logName string, env []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, log: filepath.Join(dir, logName+".log")}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p.cmd = exec.Command(filepath.Join(binaries(t), name), args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = append(os.Environ(), env...)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(syscall.SIGKILL) })
	return p
}

func (p *proc) stop(sig syscall.Signal) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	_ = p.cmd.Wait()
}

// metricsAddr waits for the daemon's "metrics endpoint listening" line.
func (p *proc) metricsAddr() string {
	p.t.Helper()
	re := regexp.MustCompile(`"addr":"([^"]+)"`)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(p.log)
		if m := re.FindSubmatch(b); m != nil {
			return string(m[1])
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(p.log)
	p.t.Fatalf("%s: no metrics endpoint in its log:\n%s", p.log, b)
	return ""
}

func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", addr, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	return mfs
}

// sample returns the value of name{label=value} (a counter, a gauge, or a
// histogram's count); label "" means the metric has no labels.
func sample(mfs map[string]*dto.MetricFamily, name, label, value string) (float64, bool) {
	for _, m := range mfs[name].GetMetric() {
		if label != "" {
			found := false
			for _, lp := range m.GetLabel() {
				found = found || (lp.GetName() == label && lp.GetValue() == value)
			}
			if !found {
				continue
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// sampleSum adds up the samples of family name whose label is value
// (every sample when label is empty): a family split by kind.
func sampleSum(mfs map[string]*dto.MetricFamily, name, label, value string) (float64, bool) {
	sum, found := 0.0, false
	for _, m := range mfs[name].GetMetric() {
		one := &dto.MetricFamily{Metric: []*dto.Metric{m}}
		if v, ok := sample(map[string]*dto.MetricFamily{name: one}, name, label, value); ok {
			sum, found = sum+v, true
		}
	}
	return sum, found
}

// initSpool makes the spool dir/spool with `farroctl init`, as an operator
// does before anything else (daemons and farroctl refuse a missing spool).
func initSpool(t *testing.T, dir string) string {
	t.Helper()
	spool := filepath.Join(dir, "spool")
	if out := farroctl(t, spool, "", "init"); !strings.Contains(out, "ready") {
		t.Fatalf("farroctl init: %q", out)
	}
	return spool
}

func farroctl(t *testing.T, spool string, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), "farroctl"), append([]string{"--spool", spool}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("farroctl %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

func stats(t *testing.T, spool string) ctl.Stats {
	t.Helper()
	var st ctl.Stats
	if err := json.Unmarshal([]byte(farroctl(t, spool, "", "stats", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitFor polls cond every 50ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const handler = `#!/bin/sh
p=$(cat)
case "$p" in
*fail*) echo failing >&2; exit 1 ;;
*sleep*) sleep 1 ;;
esac
exit 0
`

// TestMetricsEndToEnd runs the three daemons with metrics on, puts a job
// through every path (success, failure and retry, out of attempts, a dead
// agent recovered by watchdogd, a held job), and checks what each endpoint
// reports against the spool and against what happened.
func TestMetricsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	spool := initSpool(t, dir)
	h := filepath.Join(dir, "handler.sh")
	if err := os.WriteFile(h, []byte(handler), 0o755); err != nil {
		t.Fatal(err)
	}
	common := []string{"FARRO_SPOOL=" + spool, "FARRO_RESCAN=1s"}
	wd := start(t, dir, "watchdogd", common, "watchdogd", "--metrics-addr", "127.0.0.1:0", "--interval", "100ms")
	mgr := start(t, dir, "managerd", common, "managerd", "--metrics-addr", "127.0.0.1:0", "--metrics-rescan", "500ms",
		"--max-attempts", "2", "--backoff-base", "10ms", "--backoff-max", "20ms")
	wdAddr, mgrAddr := wd.metricsAddr(), mgr.metricsAddr()

	// A dead agent: w0 takes the slow job and is SIGKILLed mid-run.
	slow := strings.TrimSpace(farroctl(t, spool, `{"sleep":true}`, "submit", "--id", "slow"))
	w0 := start(t, dir, "agentd-w0", common, "agentd", "--id", "w0", "--exec", h)
	waitFor(t, 10*time.Second, "the slow job to run on w0", func() bool { return stats(t, spool).Agents["w0"] == 1 })
	w0.stop(syscall.SIGKILL)
	waitFor(t, 10*time.Second, "watchdogd to recover the slow job", func() bool {
		v, _ := sample(scrape(t, wdAddr), "farro_recoveries_total", "kind", "dead_owner")
		return v == 1
	})
	waitFor(t, 10*time.Second, "managerd to requeue it", func() bool { return stats(t, spool).States[job.Queued] == 1 })

	// The rest of the batch, queued before any agent runs.
	for i := range 10 {
		farroctl(t, spool, fmt.Sprintf(`{"n":%d}`, i), "submit")
	}
	farroctl(t, spool, `{"fail":1}`, "submit", "--id", "bad1")
	farroctl(t, spool, `{"fail":2}`, "submit", "--id", "bad2")
	farroctl(t, spool, `{}`, "submit", "--held", "--id", "paused")
	slowJob, err := job.ReadJob(filepath.Join(spool, "incoming", slow))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "managerd's view of 13 queued jobs", func() bool {
		v, _ := sample(scrape(t, mgrAddr), "farro_jobs", "state", "queued")
		return v == 13
	})
	// Submissions, counted from the event stream: the slow job and the 13
	// of the batch, all exec jobs from farroctl.
	waitFor(t, 10*time.Second, "managerd to count 14 submissions", func() bool {
		v, _ := sample(scrape(t, mgrAddr), "farro_submitted_total", "kind", "exec")
		return v == 14
	})
	if v, _ := sampleSum(scrape(t, mgrAddr), "farro_submitted_total", "", ""); v != 14 {
		t.Errorf("farro_submitted_total sums to %v, want 14 (all exec from farroctl)", v)
	}
	mfs := scrape(t, mgrAddr)
	if v, _ := sampleSum(mfs, "farro_jobs_by_kind", "kind", "exec"); v != 13 {
		t.Errorf("farro_jobs_by_kind{kind=\"exec\"} = %v, want 13", v)
	}
	if v, _ := sample(mfs, "farro_oldest_queued_job_timestamp_seconds", "", ""); v != float64(slowJob.CreatedAt.UnixNano())/1e9 {
		t.Errorf("oldest queued %v, want the slow job's created_at %v", v, float64(slowJob.CreatedAt.UnixNano())/1e9)
	}

	w1 := start(t, dir, "agentd-w1", common, "agentd", "--id", "w1", "--concurrency", "3", "--metrics-addr", "127.0.0.1:0", "--exec", h)
	w1Addr := w1.metricsAddr()
	waitFor(t, 20*time.Second, "the batch to finish", func() bool {
		st := stats(t, spool)
		return st.States[job.Succeeded] == 11 && st.States[job.Killed] == 2 && st.States[job.InProgress] == 0 &&
			st.States[job.Queued] == 0 && st.States[job.Deferred] == 0
	})
	st := stats(t, spool)

	// managerd's gauges match the spool, state by state (its view follows
	// the spool's events; a relisting every 500ms makes it exact).
	waitFor(t, 10*time.Second, "managerd's farro_jobs to match farroctl stats", func() bool {
		mfs := scrape(t, mgrAddr)
		for _, s := range job.States {
			if v, ok := sample(mfs, "farro_jobs", "state", string(s)); !ok || v != float64(st.States[s]) {
				return false
			}
		}
		return true
	})
	mfs = scrape(t, mgrAddr)
	for name, want := range map[string]float64{"farro_oldest_queued_job_timestamp_seconds": 0, "farro_claim_locks": 0, "farro_corrupt_entries": 0} {
		if v, ok := sample(mfs, name, "", ""); !ok || v != want {
			t.Errorf("managerd %s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{
		{"farro_retries_total", "from", "stale", 1},
		{"farro_retries_total", "from", "failed", 2},
		{"farro_jobs_out_of_attempts_total", "from", "failed", 2},
		{"farro_jobs_out_of_attempts_total", "from", "stale", 0},
		{"farro_deferred_promoted_total", "", "", 2},
		{"farro_build_info", "program", "managerd", 1},
	} {
		if v, ok := sample(mfs, c.name, c.label, c.value); !ok || v != c.want {
			t.Errorf("managerd %s{%s=%q} = %v (present %v), want %v", c.name, c.label, c.value, v, ok, c.want)
		}
	}

	// agentd w1 ran everything but w0's lost attempt, all exec jobs.
	mfs = scrape(t, w1Addr)
	if v, _ := sample(mfs, "farro_commit_duration_seconds", "kind", "exec"); v != 15 {
		t.Errorf("agentd farro_commit_duration_seconds{kind=\"exec\"} = %v, want 15", v)
	}
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{
		{"farro_jobs_finished_total", "outcome", "succeeded", 11},
		{"farro_jobs_finished_total", "outcome", "failed", 4},
		{"farro_jobs_finished_total", "outcome", "lost", 0},
		{"farro_job_run_duration_seconds", "outcome", "succeeded", 11},
		{"farro_job_queue_wait_seconds", "", "", 15},
		{"farro_claim_duration_seconds", "", "", 15},
		{"farro_commit_duration_seconds", "", "", 15},
		{"farro_agent_slots", "", "", 3},
		{"farro_agent_slots_busy", "", "", 0},
	} {
		if v, ok := sampleSum(mfs, c.name, c.label, c.value); !ok || v != c.want {
			t.Errorf("agentd %s{%s=%q} = %v (present %v), want %v", c.name, c.label, c.value, v, ok, c.want)
		}
	}
	if _, ok := mfs["farro_jobs"]; ok {
		t.Error("agentd exports farro_jobs (managerd's)")
	}
	mfs = scrape(t, wdAddr)
	if v, _ := sample(mfs, "farro_recoveries_total", "kind", "silent_owner"); v != 0 {
		t.Errorf("silent_owner recoveries %v, want 0", v)
	}

	// The textfile written by farroctl agrees.
	tf := t.TempDir()
	farroctl(t, spool, "", "metrics", "--textfile", tf)
	f, err := os.Open(filepath.Join(tf, "farro.prom"))
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	tmfs, err := p.TextToMetricFamilies(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range job.States {
		if v, _ := sample(tmfs, "farro_jobs", "state", string(s)); v != float64(st.States[s]) {
			t.Errorf("farro.prom farro_jobs{state=%q} = %v, want %d", s, v, st.States[s])
		}
	}

	// farroctl top in a pseudo-terminal: a live screen, refreshed, quit with q.
	t.Run("top", func(t *testing.T) { topInPty(t, spool, st) })

	for _, d := range []*proc{w1, mgr, wd} {
		d.stop(syscall.SIGTERM)
	}
	strictLogs(t, w0, w1, mgr, wd)
}

// strictLogs parses every line every daemon wrote (stdout and stderr)
// strictly: each is one JSON object, no object repeats a key at any depth
// (jq would hide it; Elasticsearch rejects the line), each carries the
// standard fields, and each state transition carries the job's id, kind
// and event{type,from,to} (and, from agentd, the attempt's correlation
// id).
func strictLogs(t *testing.T, daemons ...*proc) {
	t.Helper()
	total, dups, transitions := 0, 0, 0
	for _, p := range daemons {
		b, err := os.ReadFile(p.log)
		if err != nil {
			t.Fatal(err)
		}
		n, problems := logxtest.Scan(b)
		total += n
		for _, pr := range problems {
			var dup *logxtest.DuplicateKeyError
			if errors.As(pr.Err, &dup) {
				dups++
			}
			if len(problems) < 5 || errors.As(pr.Err, &dup) && dups <= 3 {
				t.Errorf("%s line %d: %v: %s", filepath.Base(p.log), pr.Line, pr.Err, pr.Text)
			}
		}
		if len(problems) > 0 {
			t.Errorf("%s: %d of %d lines fail the strict check", filepath.Base(p.log), len(problems), n)
			continue
		}
		for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"timestamp", "level", "message", "app", "actor"} {
				if s, _ := m[k].(string); s == "" {
					t.Errorf("%s line %d: no %s: %s", filepath.Base(p.log), i+1, k, line)
				}
			}
			ev, _ := m["event"].(map[string]any)
			if ev == nil || ev["type"] != "state_transition" {
				continue
			}
			transitions++
			want := []string{"job_id", "kind"}
			if strings.HasPrefix(m["actor"].(string), "agentd/") {
				want = append(want, "correlation_id")
			}
			for _, k := range want {
				if s, _ := m[k].(string); s == "" {
					t.Errorf("%s line %d: transition without %s: %s", filepath.Base(p.log), i+1, k, line)
				}
			}
			if s, _ := ev["from"].(string); s == "" {
				t.Errorf("%s line %d: transition without event.from: %s", filepath.Base(p.log), i+1, line)
			}
			if s, _ := ev["to"].(string); s == "" {
				t.Errorf("%s line %d: transition without event.to: %s", filepath.Base(p.log), i+1, line)
			}
		}
	}
	t.Logf("strict log check: %d lines of %d daemons, %d transitions, %d with a duplicate key", total, len(daemons), transitions, dups)
	if transitions == 0 {
		t.Error("no state_transition line in any daemon's log")
	}
}

// topInPty runs farroctl top on a 100x30 pseudo-terminal, reads its
// frames, checks the screen, and quits it with q.
func topInPty(t *testing.T, spool string, st ctl.Stats) {
	cmd := exec.Command(filepath.Join(binaries(t), "farroctl"), "--spool", spool, "top", "--interval", "200ms")
	cmd.Env = append(os.Environ(), "TERM=xterm")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		r := bufio.NewReader(ptmx)
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	screen := func() string {
		mu.Lock()
		defer mu.Unlock()
		s := out.String()
		// The last frame starts at the last cursor-home sequence.
		if i := strings.LastIndex(s, "\x1b[H"); i >= 0 {
			s = s[i:]
		}
		return s
	}
	want := []string{
		"farro top · " + spool,
		fmt.Sprintf("%-12s %10d", "succeeded", st.States[job.Succeeded]),
		fmt.Sprintf("%-12s %10d", "killed", st.States[job.Killed]),
		fmt.Sprintf("%-12s %10d", "held", st.States[job.Held]),
		"oldest queued: -",
		"throughput (last 1m): 0.0 jobs/s",
		"DAEMONS: managerd live · watchdogd live",
		"WORKERS: 1 live agent(s), 0 job(s) running, 1 gone and idle", // w0 was SIGKILLed
		"w1     (idle)",
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := screen()
		missing := ""
		for _, w := range want {
			if !strings.Contains(s, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("screen lacks %q:\n%s", missing, strings.ReplaceAll(s, "\x1b", "ESC"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	all := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	if s := all(); !strings.HasPrefix(s, "\x1b[?1049h") || strings.Count(s, "\x1b[H") < 3 {
		t.Errorf("not a refreshed alternate screen (%d frames): %q", strings.Count(s, "\x1b[H"), s[:min(len(s), 80)])
	}
	for _, line := range strings.Split(screen(), "\r\n") {
		if n := len([]rune(strings.ReplaceAll(strings.ReplaceAll(line, "\x1b[K", ""), "\x1b[H", ""))); n > 100 {
			t.Errorf("line wider than the terminal (%d): %q", n, line)
		}
	}
	if _, err := ptmx.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("top exited with %v after q", err)
		}
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("top did not quit on q")
	}
	ptmx.Close()
	<-readDone
	if s := all(); !strings.HasSuffix(s, "\x1b[?25h\x1b[?1049l") {
		t.Errorf("terminal not restored at exit: ...%q", s[max(0, len(s)-40):])
	}
}

// TestCompletionLoadsInBash loads every program's completion script in
// bash and checks the completion is registered and completes.
func TestCompletionLoadsInBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("bash is missing: CI installs it (.ci/run)")
		}
		t.Skip("no bash")
	}
	bin := binaries(t)
	for _, prog := range []string{"farroctl", "agentd", "managerd", "watchdogd"} {
		script := fmt.Sprintf(`source <(%q completion bash) || exit 3
complete -p %s || exit 4
COMP_WORDS=(%s --metr); COMP_CWORD=1
[ %s = farroctl ] && COMP_WORDS=(farroctl hist)
_farro_%s
printf '%%s\n' "${COMPREPLY[@]}"`, filepath.Join(bin, prog), prog, prog, prog, prog)
		out, err := exec.Command("bash", "--norc", "--noprofile", "-c", script).CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", prog, err, out)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		want := []string{"complete -F _farro_" + prog + " " + prog}
		if prog == "farroctl" {
			want = append(want, "history")
		} else {
			want = append(want, "--metrics-addr", "--metrics-allow-remote")
			if prog == "managerd" {
				want = append(want, "--metrics-rescan")
			}
		}
		if strings.Join(lines, "|") != strings.Join(want, "|") {
			t.Errorf("%s: got %q, want %q", prog, lines, want)
		}
	}
	// An unknown shell is a usage error.
	cmd := exec.Command(filepath.Join(bin, "farroctl"), "completion", "fish")
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 {
		t.Errorf("farroctl completion fish: %v, want exit 2", err)
	}
}

// TestJournalPrefix runs watchdogd the way systemd does when its stdout is
// the journal (JOURNAL_STREAM names stdout's device and inode): every line
// carries its syslog priority, the JSON after it intact. A daemon whose
// stdout is something else gets bare JSON lines.
func TestJournalPrefix(t *testing.T) {
	dir := t.TempDir()
	for _, journal := range []bool{true, false} {
		logPath := filepath.Join(dir, fmt.Sprintf("journal-%v.log", journal))
		f, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		stream := fmt.Sprintf("%d:%d", st.Dev, st.Ino)
		if !journal {
			stream = fmt.Sprintf("%d:%d", st.Dev, st.Ino+1)
		}
		cmd := exec.Command(filepath.Join(binaries(t), "watchdogd"), "--spool", initSpool(t, dir))
		cmd.Stdout, cmd.Stderr = f, f
		cmd.Env = append(os.Environ(), "JOURNAL_STREAM="+stream)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "watchdogd to be ready", func() bool {
			b, _ := os.ReadFile(logPath)
			return bytes.Contains(b, []byte("ready"))
		})
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		f.Close()
		b, _ := os.ReadFile(logPath)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) < 3 {
			t.Fatalf("journal=%v: %d lines:\n%s", journal, len(lines), b)
		}
		for _, l := range lines {
			body := l
			if journal {
				if !strings.HasPrefix(l, "<6>") && !strings.HasPrefix(l, "<4>") && !strings.HasPrefix(l, "<3>") {
					t.Errorf("journal line without a priority prefix: %q", l)
					continue
				}
				body = l[3:]
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(body), &m); err != nil {
				t.Errorf("journal=%v: not a JSON line after the prefix: %q", journal, l)
			}
		}
	}
}

// TestMetricsAddrRefused: a non-loopback address is a startup error.
func TestMetricsAddrRefused(t *testing.T) {
	dir := t.TempDir()
	for _, addr := range []string{"0.0.0.0:0", ":9641"} {
		cmd := exec.Command(filepath.Join(binaries(t), "managerd"), "--spool", filepath.Join(dir, "spool"), "--metrics-addr", addr)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--metrics-allow-remote") {
			t.Errorf("managerd --metrics-addr %s: %v\n%s", addr, err, out)
		}
	}
}
