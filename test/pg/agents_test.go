package pg

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// The daemons on a database write their rows in the agents table;
// farroctl agents lists them; a submit without --max-attempts takes
// managerd's advertised limit; an agent id live on another host refuses
// a second agentd with that id (one line, exit 150); a clean stop stamps
// the row stopped.
func TestAgentsTableWrittenByDaemons(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := testpg.NewDatabase(t, testpg.Start(t))
	dir := t.TempDir()
	farroctl := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(bins.Dir(t), "farroctl"), append(args, "--store", url)...)
		cmd.Env = append(os.Environ(), "FARRO_STORE=", "FARRO_SPOOL=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := farroctl("migrate"); err != nil {
		t.Fatalf("farroctl migrate: %v\n%s", err, out)
	}
	st, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	h1, h2 := filepath.Join(dir, "host1"), filepath.Join(dir, "host2")
	for _, d := range []string{h1, h2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	common := []string{"--store", url}
	a1 := start(t, dir, "agentd-w1", "agentd", append(common, "--spool", h1, "--id", "w1", "--concurrency", "3")...)
	md := start(t, dir, "managerd", "managerd", append(common, "--spool", h1, "--max-attempts", "7")...)
	wd := start(t, dir, "watchdogd", "watchdogd", append(common, "--spool", h1)...)

	var rows []pgstore.AgentRow
	deadline := time.Now().Add(15 * time.Second)
	for {
		rows, _, err = st.Agents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 3 {
			break
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Command("sh", "-c", "tail -n 5 "+dir+"/*.log").CombinedOutput()
			t.Fatalf("agents table: %+v; logs:\n%s", rows, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	host, _ := os.Hostname()
	a, m, w := rows[0], rows[1], rows[2]
	if a.Kind != "agentd" || a.ID != "w1" || a.Host != host || a.PID != a1.cmd.Process.Pid || !a.Live ||
		a.Concurrency != 3 || strings.Join(a.Kinds, ",") != "noop" {
		t.Errorf("agentd row: %+v", a)
	}
	if m.Kind != "managerd" || m.ID != host || m.PID != md.cmd.Process.Pid || m.MaxAttempts != 7 || !m.Live {
		t.Errorf("managerd row: %+v", m)
	}
	if w.Kind != "watchdogd" || w.PID != wd.cmd.Process.Pid || !w.Live {
		t.Errorf("watchdogd row: %+v", w)
	}

	out, err := farroctl("agents")
	if err != nil || !regexp.MustCompile(`(?m)^w1 +live +\d+ +\S+ +3 +0 `).MatchString(out) ||
		!regexp.MustCompile(`(?m)^managerd@\S+ +live `).MatchString(out) {
		t.Errorf("farroctl agents: %v\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(bins.Dir(t), "farroctl"), "submit", "--id", "lim", "--kind", "exec", "--held", "--store", url)
	cmd.Stdin = strings.NewReader(`{}`)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("submit: %v\n%s", err, out)
	}
	if j, err := st.Get(ctx, "lim"); err != nil || j.MaxAttempts != 7 {
		t.Errorf("submit without --max-attempts: %+v, %v; want managerd's 7", j, err)
	}

	if out, err := farroctl("events", "--job", "lim"); err != nil || !regexp.MustCompile(`^\S+Z  farroctl +lim  - -> held  attempt 0  submitted\n$`).MatchString(out) {
		t.Errorf("farroctl events --job lim: %v %q", err, out)
	}

	// w2 is live on another host: a second w2 here is refused.
	if _, err := st.Register(ctx, pgstore.Registration{Kind: pgstore.KindAgentd, ID: "w2", Host: "elsewhere.example", PID: 31337, Fresh: time.Minute}); err != nil {
		t.Fatal(err)
	}
	a2 := exec.Command(filepath.Join(bins.Dir(t), "agentd"), append(common, "--spool", h2, "--id", "w2")...)
	a2.Env = append(os.Environ(), "FARRO_STORE=", "FARRO_SPOOL=")
	var stderr strings.Builder
	a2.Stderr = &stderr
	err = a2.Run()
	if code := a2.ProcessState.ExitCode(); code != pgstore.ExitAlreadyRunning {
		t.Errorf("agentd w2 with w2 live elsewhere: exit %d (%v), want %d; stderr %q", code, err, pgstore.ExitAlreadyRunning, stderr.String())
	}
	if got := stderr.String(); strings.Count(got, "\n") != 1 ||
		!strings.Contains(got, "agent id w2 is already running on host elsewhere.example as pid 31337 (started ") {
		t.Errorf("agentd w2 refusal: %q", got)
	}

	// A clean stop stamps the row stopped; farroctl agents says so.
	md.stop(syscall.SIGTERM)
	rows, _, err = st.Agents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Kind == "managerd" && (r.Live || r.StoppedAt == nil) {
			t.Errorf("managerd row after SIGTERM: %+v", r)
		}
	}
	if out, err := farroctl("agents"); err != nil || !regexp.MustCompile(`(?m)^managerd@\S+ +gone \(stopped\) `).MatchString(out) {
		t.Errorf("farroctl agents after managerd stopped: %v\n%s", err, out)
	}
}
