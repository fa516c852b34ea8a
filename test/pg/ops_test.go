package pg

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// opsHandler writes a line to each stream; a prompt with "slow" runs
// until it is killed.
const opsHandler = `#!/bin/sh
prompt=$(cat)
echo "hello from $FARRO_JOB_ID attempt $FARRO_ATTEMPT"
echo "to stderr" >&2
case "$prompt" in *slow*) exec sleep 60;; esac
exit 0
`

// farroctl's operator commands on a database, with a real agentd and
// managerd: logs prints an attempt's output from the local directory
// its agent ran it in (and names the host otherwise), metrics and
// managerd's --metrics-addr export the queue's gauges from the database,
// fsck is clean on a healthy queue, reports the lease of a SIGKILLed
// agent's job once it expired, and --repair recovers it.
func TestOpsCommandsOnADatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := testpg.NewDatabase(t, testpg.Start(t))
	dir := t.TempDir()
	farroctl := func(stdin string, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bins.Dir(t), "farroctl"), append(args, "--store", url)...)
		cmd.Env = append(os.Environ(), "FARRO_STORE=", "FARRO_SPOOL=")
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}
	if out, errs, code := farroctl("", "migrate"); code != 0 {
		t.Fatalf("farroctl migrate: exit %d\n%s%s", code, out, errs)
	}
	st, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	script := filepath.Join(dir, "handler.sh")
	if err := os.WriteFile(script, []byte(opsHandler), 0o755); err != nil {
		t.Fatal(err)
	}
	h1, h2 := filepath.Join(dir, "host1"), filepath.Join(dir, "host2")
	for _, d := range []string{h1, h2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	common := []string{"--store", url, "--spool", h1}
	a1 := start(t, dir, "agentd-w1", "agentd", append(common, "--id", "w1", "--heartbeat", "200ms", "--lease", "1s", "--exec", script)...)
	md := start(t, dir, "managerd", "managerd", append(common, "--metrics-addr", "127.0.0.1:0", "--metrics-rescan", "100ms")...)
	for _, id := range []string{"ok1", "ok2"} {
		if out, errs, code := farroctl(`{}`, "submit", "--id", id, "--kind", "exec"); code != 0 {
			t.Fatalf("submit %s: exit %d %s%s", id, code, out, errs)
		}
	}
	waitUntil(t, 20*time.Second, "both jobs to succeed", func() bool {
		c, err := st.Counts(ctx)
		return err == nil && c[job.Succeeded] == 2
	})

	// logs: from host1's local directory, as on a spool.
	out, errs, code := farroctl("", "logs", "ok1", "--spool", h1)
	if want := "==> stdout, attempt 1 <==\nhello from ok1 attempt 1\n\n==> stderr, attempt 1 <==\nto stderr\n"; code != 0 || out != want {
		t.Errorf("logs ok1 --spool host1: exit %d %q %q, want %q", code, out, errs, want)
	}
	host, _ := os.Hostname()
	out, errs, code = farroctl("", "logs", "ok2", "--stdout", "--spool", h2)
	if code != 1 || out != "" || strings.Count(errs, "\n") != 1 ||
		!strings.HasPrefix(errs, "farroctl: ok2: attempt 1 ran on agent w1 on this host ("+host+"); its output is in scratch/w1/ok2/ (stdout.1.log, stderr.1.log) under that agentd's local directory, not under "+h2) {
		t.Errorf("logs ok2 --spool host2: exit %d %q %q", code, out, errs)
	}

	// metrics, and managerd's endpoint, from the database.
	out, errs, code = farroctl("", "metrics")
	if code != 0 || !strings.Contains(out, `farro_jobs{state="succeeded"} 2`+"\n") || strings.Contains(out, "farro_claim_locks") {
		t.Errorf("metrics: exit %d %q\n%s", code, errs, out)
	}
	addr := logAddr(t, filepath.Join(dir, "managerd.log"))
	waitUntil(t, 10*time.Second, "managerd's farro_jobs to count the succeeded jobs", func() bool {
		text := scrapeText(t, addr)
		return strings.Contains(text, `farro_jobs{state="succeeded"} 2`+"\n") && strings.Contains(text, `farro_jobs{state="queued"} 0`+"\n") &&
			strings.Contains(text, "# HELP farro_jobs Jobs in the database, by state") && !strings.Contains(text, "farro_claim_locks")
	})

	// fsck: a healthy queue is clean.
	if out, errs, code := farroctl("", "fsck"); code != 0 || out != "fsck: clean\n" {
		t.Errorf("fsck of a healthy queue: exit %d %q %q", code, out, errs)
	}

	// w1 is SIGKILLed running a slow job; no watchdogd runs: once its
	// lease has expired fsck reports it, and --repair recovers it.
	if out, errs, code := farroctl(`{"slow":true}`, "submit", "--id", "slow1", "--kind", "exec"); code != 0 {
		t.Fatalf("submit slow1: exit %d %s%s", code, out, errs)
	}
	waitUntil(t, 10*time.Second, "slow1 to run", func() bool {
		_, err := os.Stat(filepath.Join(h1, "scratch", "w1", "slow1", job.OutputName(job.Stdout, 1)))
		return err == nil
	})
	a1.stop(syscall.SIGKILL)
	var fsckOut string
	waitUntil(t, 10*time.Second, "fsck to report slow1's expired lease", func() bool {
		fsckOut, errs, code = farroctl("", "fsck", "--grace", "0s")
		return code == 1
	})
	if !regexp.MustCompile(`^lease-expired +slow1 jobs: lease of agent w1 expired \S+ ago .* -> recover: .*\n$`).MatchString(fsckOut) ||
		errs != "farroctl: fsck: 1 findings (1 repairable with --repair); nothing changed\n" {
		t.Errorf("fsck after the kill: %q %q", fsckOut, errs)
	}
	out, errs, code = farroctl("", "fsck", "--grace", "0s", "--repair")
	if code != 0 || !strings.Contains(out, "=> stale: in-progress -> stale") || !strings.HasSuffix(out, "fsck: 1 findings, all repaired\n") {
		t.Errorf("fsck --repair: exit %d %q %q", code, out, errs)
	}
	evs, err := st.History(ctx, "slow1")
	if err != nil {
		t.Fatal(err)
	}
	recovered := false
	for _, ev := range evs {
		recovered = recovered || (ev.From == job.InProgress && ev.To == job.Stale && ev.Actor == "farroctl")
	}
	if !recovered {
		t.Errorf("slow1's history has no recovery by farroctl: %+v", evs)
	}
	md.stop(syscall.SIGTERM)
	b, err := os.ReadFile(filepath.Join(dir, "managerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	if _, problems := logxtest.Scan(b); len(problems) > 0 {
		t.Errorf("managerd.log: %v", problems)
	}
}

func waitUntil(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logAddr waits for the metrics endpoint's address in a daemon's log.
func logAddr(t *testing.T, log string) string {
	t.Helper()
	re := regexp.MustCompile(`"addr":"([^"]+)"`)
	var addr string
	waitUntil(t, 10*time.Second, "the metrics endpoint in "+log, func() bool {
		b, _ := os.ReadFile(log)
		if m := re.FindSubmatch(b); m != nil {
			addr = string(m[1])
		}
		return addr != ""
	})
	return addr
}

func scrapeText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s %v", addr, resp.Status, err)
	}
	return string(b)
}
