// Package dashboard tests farroctl serve end to end: the real daemons on a
// temporary spool with jobs in every state, agents live and gone, a crawl
// of the loopback test site, and the dashboard driven by a real headless
// Chromium, checked against what farroctl itself reports.
package dashboard

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testbin"
	"github.com/farro-dev/farro/internal/testbrowser"
	"github.com/farro-dev/farro/internal/testsite"
	"github.com/farro-dev/farro/pkg/job"
)

var bins = &testbin.Set{Prefix: "farro-dash-bin-", Pkgs: []string{"./cmd/agentd", "./cmd/managerd", "./cmd/watchdogd", "./cmd/farroctl"}}

func TestMain(m *testing.M) {
	code := m.Run()
	bins.Remove()
	os.Exit(code)
}

// proc is a process whose output goes to a log file in the test's dir.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func start(t *testing.T, dir, name string, env []string, args ...string) *proc {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, filepath.Base(args[0])+"-"+name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := &proc{cmd: exec.Command(filepath.Join(bins.Dir(t), args[0]), args[1:]...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives a killed test
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(syscall.SIGKILL) })
	return p
}

func (p *proc) stop(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

type farro struct {
	t     *testing.T
	spool string
}

func (f *farro) ctl(stdin string, args ...string) string {
	f.t.Helper()
	cmd := exec.Command(filepath.Join(bins.Dir(f.t), "farroctl"), append([]string{"--spool", f.spool}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		f.t.Fatalf("farroctl %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

func (f *farro) stats() ctl.Stats {
	f.t.Helper()
	var st ctl.Stats
	if err := json.Unmarshal([]byte(f.ctl("", "stats", "--json")), &st); err != nil {
		f.t.Fatal(err)
	}
	return st
}

func (f *farro) where(id string) job.State {
	f.t.Helper()
	var doc ctl.ShowDoc
	if err := json.Unmarshal([]byte(f.ctl("", "show", id)), &doc); err != nil {
		f.t.Fatal(err)
	}
	return doc.Location
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const handler = `#!/bin/sh
p=$(cat)
case "$p" in
*fail*) echo "failing as asked" >&2; exit 1 ;;
*sleep*) sleep 60 ;;
esac
echo "done: $p"
`

// artifacts is where screenshots go: $FARRO_TEST_ARTIFACTS, else a
// temporary directory of the test.
func artifacts(t *testing.T) string {
	dir := os.Getenv("FARRO_TEST_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDashboardInChromium(t *testing.T) {
	bin := testbrowser.Find()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("Chromium is not installed (apt-get install chromium; .ci/run installs it): the dashboard's browser test cannot run")
		}
		t.Skip("Chromium is not installed (apt-get install chromium); set CI=true to make this a failure")
	}
	bins.Dir(t) // built before the clock starts
	t0 := time.Now()
	dir := t.TempDir()
	t.Cleanup(func() { // runs last: what the daemons said, when the test failed
		if !t.Failed() {
			return
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("%s (last lines):\n%s", filepath.Base(l), strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	})
	f := &farro{t: t, spool: filepath.Join(dir, "spool")}
	f.ctl("", "init")
	h := filepath.Join(dir, "handler.sh")
	if err := os.WriteFile(h, []byte(handler), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"FARRO_SPOOL=" + f.spool, "FARRO_RESCAN=1s"}
	start(t, dir, "", env, "watchdogd", "--interval", "100ms")
	mgr := start(t, dir, "", env, "managerd", "--backoff-base", "10ms", "--backoff-max", "20ms")
	w1 := start(t, dir, "w1", env, "agentd", "--id", "w1", "--concurrency", "4", "--exec", h)

	// A crawl of the loopback test site: one host, a small plain tree.
	site := testsite.Start(testsite.Options{Plain: true, Fanout: 3, Levels: 2})
	t.Cleanup(site.Close)
	args := []string{"crawl", "start", "site", "--seed", site.URL(testsite.HostA, "/"), "--allow-private", "--user-agent", testsite.UserAgent,
		"--delay", "10ms", "--jitter", "0s", "--max-pages-per-domain", "50"}
	for _, r := range site.Resolve() {
		args = append(args, "--resolve", r)
	}
	f.ctl("", args...)

	// Jobs that end: succeeded, and killed (out of attempts).
	okID := strings.TrimSpace(f.ctl(`{"say":"hello"}`, "submit", "--id", "ok-1"))
	f.ctl(`{"fail":true}`, "submit", "--id", "doomed", "--max-attempts", "1")
	// Jobs that wait: deferred, held (with a hostile reason), queued (its
	// kind paused queue-wide).
	f.ctl(`{}`, "submit", "--id", "later", "--in", "1h")
	f.ctl(`{}`, "submit", "--id", "later-2", "--in", "1h")
	f.ctl(`{}`, "submit", "--id", "evil", "--held")
	f.ctl("", "pause", "noop", "--reason", "dashboard test")
	f.ctl(`{}`, "submit", "--id", "waiting", "--kind", "noop")
	waitFor(t, 40*time.Second, "the first jobs and the crawl to finish", func() bool {
		st := f.stats()
		var cs ctl.CrawlSummary
		_ = json.Unmarshal([]byte(f.ctl("", "crawl", "status", "site", "--json")), &cs)
		return st.States[job.Succeeded] >= 1 && st.States[job.Killed] == 1 && cs.State == crawl.Done
	})
	t.Logf("first jobs and the crawl done in %s", time.Since(t0).Round(time.Millisecond))
	hostile := `<script>document.title="pwned"</script><img src=x onerror=alert(1)>`
	f.ctl("", "cancel", "evil", "--reason", hostile)
	f.ctl(`{}`, "submit", "--id", "evil-held", "--held")

	// managerd stops, so that failed and stale jobs stay where they are.
	mgr.stop(syscall.SIGTERM)
	w1.stop(syscall.SIGTERM)
	// A gone agent: w2 takes a long job and is SIGKILLed; watchdogd makes
	// that job stale.
	w2 := start(t, dir, "w2", env, "agentd", "--id", "w2", "--exec", h)
	f.ctl(`{"sleep":1}`, "submit", "--id", "orphan")
	// Its claim must be complete (job.json says in-progress): a claim cut
	// short is rolled back to queued by recovery, not made stale.
	waitFor(t, 10*time.Second, "w2 to run the orphan", func() bool {
		var doc ctl.ShowDoc
		out, _ := exec.Command(filepath.Join(bins.Dir(t), "farroctl"), "--spool", f.spool, "show", "orphan").Output() // may be caught moving
		return json.Unmarshal(out, &doc) == nil && doc.Job != nil &&
			doc.Location == job.InProgress && doc.Job.Status == job.InProgress
	})
	w2.stop(syscall.SIGKILL)
	waitFor(t, 20*time.Second, "watchdogd to make the orphan stale", func() bool { return f.stats().States[job.Stale] == 1 })
	// A live agent with a running job, and a failed job.
	w1b := start(t, dir, "w1b", env, "agentd", "--id", "w1", "--concurrency", "2", "--drain-timeout", "200ms", "--exec", h)
	t.Cleanup(func() { w1b.stop(syscall.SIGTERM) }) // drained: it stops its handlers (no sleep outlives the test)
	f.ctl(`{"sleep":2}`, "submit", "--id", "running")
	f.ctl(`{"fail":2}`, "submit", "--id", "flaky", "--max-attempts", "3")
	waitFor(t, 10*time.Second, "a job in every state", func() bool {
		st := f.stats()
		for _, s := range job.States {
			if st.States[s] == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("spool ready in %s", time.Since(t0).Round(time.Millisecond))

	// farroctl serve, as an operator starts it.
	serve := exec.Command(filepath.Join(bins.Dir(t), "farroctl"), "--spool", f.spool, "serve", "--listen", "127.0.0.1:0", "--actions", "--refresh", "0")
	out, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	serve.Stderr = os.Stderr
	serve.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Signal(syscall.SIGTERM); _ = serve.Wait() })
	var base, token string
	sc := bufio.NewScanner(out)
	for sc.Scan() && (base == "" || token == "") {
		line := sc.Text()
		if m := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+)/$`).FindStringSubmatch(line); m != nil {
			base = m[1]
		}
		if m := regexp.MustCompile(`token \(valid until this process stops\): ([0-9a-f]{32})$`).FindStringSubmatch(line); m != nil {
			token = m[1]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if base == "" || token == "" {
		t.Fatalf("farroctl serve printed no URL or token")
	}

	shots := artifacts(t)
	t.Logf("screenshots in %s", shots)
	blog, err := os.Create(filepath.Join(dir, "chromium.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer blog.Close()
	b, err := testbrowser.Start(bin, dir, blog)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := b.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	shot := func(p *testbrowser.Page, name string) {
		t.Helper()
		must(p.Screenshot(filepath.Join(shots, name+".png")))
	}

	// Overview: the counts a person reads are farroctl stats'.
	before := f.stats()
	must(p.Navigate(base + "/"))
	var counts map[string]string
	must(p.Eval(`Object.fromEntries([...document.querySelectorAll("td.count")].map(e => [e.dataset.state, e.textContent]))`, &counts))
	after := f.stats()
	for _, s := range job.States {
		if before.States[s] != after.States[s] {
			t.Fatalf("the spool changed while the overview was read: %v -> %v", before.States, after.States)
		}
		if counts[string(s)] != fmt.Sprint(after.States[s]) {
			t.Errorf("overview shows %s %q, farroctl stats %d", s, counts[string(s)], after.States[s])
		}
	}
	agents, err := p.Table("#agents tr")
	must(err)
	agentState, agentJobs := map[string]string{}, map[string]string{}
	for _, r := range agents[1:] {
		if len(r) == 8 {
			agentState[r[0]], agentJobs[r[0]] = r[1], r[7]
		}
	}
	if agentState["w1"] != "live" || !strings.HasPrefix(agentState["w2"], "gone") {
		t.Errorf("agents as shown: %v", agents)
	}
	if !strings.HasPrefix(agentJobs["w1"], "running exec #1 heartbeat") {
		t.Errorf("the overview does not show w1's running job: %q", agentJobs["w1"])
	}
	var bars int
	must(p.Eval(`document.querySelectorAll("#chart rect").length`, &bars))
	if bars == 0 {
		t.Errorf("the last hour's chart has no bar")
	}
	shot(p, "overview")

	// Jobs: a page of them; the hostile reason is text, not markup.
	must(p.Navigate(base + "/jobs"))
	rows, err := p.Table("#jobs tr")
	must(err)
	if len(rows)-1 != min(after.Total, 50) {
		t.Errorf("jobs page shows %d rows, the spool holds %d jobs", len(rows)-1, after.Total)
	}
	shot(p, "jobs")
	must(p.Navigate(base + "/jobs?state=killed"))
	var title string
	var scripts, imgs int
	must(p.Eval(`document.title`, &title))
	must(p.Eval(`document.querySelectorAll("script").length`, &scripts))
	must(p.Eval(`document.querySelectorAll("img").length`, &imgs))
	if title == "pwned" || scripts != 0 || imgs != 0 {
		t.Errorf("hostile reason ran: title %q, %d scripts, %d images", title, scripts, imgs)
	}
	if ok, _ := p.HasText(`<script>document.title="pwned"</script>`); !ok {
		t.Errorf("the hostile reason is not shown as text")
	}

	// A job's page: its history is farroctl history's.
	must(p.Navigate(base + "/jobs/" + okID))
	hist, err := p.Table("#history tr.ev")
	must(err)
	var want [][]string
	for _, line := range strings.Split(strings.TrimSpace(f.ctl("", "history", "--json", okID)), "\n") {
		var ev job.Event
		must(json.Unmarshal([]byte(line), &ev))
		from := string(ev.From)
		if from == "" {
			from = "-"
		}
		want = append(want, []string{ev.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"), ev.Actor, from, string(ev.To), fmt.Sprint(ev.Attempt), ev.Reason})
	}
	if fmt.Sprint(hist) != fmt.Sprint(want) {
		t.Errorf("history on the page:\n%v\nfarroctl history:\n%v", hist, want)
	}
	if ok, _ := p.HasText(`done: {"say":"hello"}`); !ok {
		t.Errorf("the job page does not show the output of its attempt")
	}
	shot(p, "job")

	// Crawls: the domain rows are crawl status' per_domain.
	must(p.Navigate(base + "/crawls"))
	if ok, _ := p.HasText("site"); !ok {
		t.Errorf("the crawls page does not list the crawl")
	}
	must(p.Click(`a[href="/crawls/site"]`))
	var cs ctl.CrawlSummary
	must(json.Unmarshal([]byte(f.ctl("", "crawl", "status", "site", "--json")), &cs))
	domains, err := p.Table("#domains tr.domain")
	must(err)
	var got, wantD []string
	for _, r := range domains {
		got = append(got, r[0]+" "+r[1]+" "+r[2])
	}
	for _, d := range cs.PerDomain {
		wantD = append(wantD, fmt.Sprintf("%s %s %d", d.Domain, d.Status, d.PagesCrawledOnce()))
	}
	sort.Strings(got)
	sort.Strings(wantD)
	if len(wantD) == 0 || fmt.Sprint(got) != fmt.Sprint(wantD) {
		t.Errorf("domains on the page %v, crawl status %v", got, wantD)
	}
	must(p.SetValue(`#why-form input[name="url"]`, site.URL(testsite.HostA, "/")))
	must(p.Click(`#why-form button`))
	why, err := p.Text("#why")
	must(err)
	if !strings.HasPrefix(why, ctl.WhyDone) {
		t.Errorf("why of the seed: %q", why)
	}
	shot(p, "crawl")

	// An action without the token is refused and changes nothing.
	must(p.Navigate(base + "/jobs/later"))
	must(p.Click("#act-hold"))
	refused, err := p.Text("#err")
	must(err)
	if !strings.Contains(refused, "refused: no valid action token") {
		t.Errorf("hold without the token: page says %q", refused)
	}
	if st := f.where("later"); st != job.Deferred {
		t.Fatalf("hold without the token moved the job to %s", st)
	}
	shot(p, "refused")

	// Another browser, with the token: the job moves.
	p2, err := b.NewIsolatedPage()
	must(err)
	must(p2.Navigate(base + "/login?next=/jobs/later-2"))
	must(p2.SetValue("#token", token))
	must(p2.Click("#login-submit"))
	if u, _ := p2.URL(); !strings.HasSuffix(u, "/jobs/later-2") {
		var txt string
		_ = p2.Eval("document.body.innerText", &txt)
		t.Fatalf("after login the browser is at %s: %s", u, txt)
	}
	must(p2.Click("#act-hold"))
	msg, err := p2.Text("#msg")
	must(err)
	if !strings.Contains(msg, "deferred -> held") {
		t.Errorf("hold with the token: page says %q", msg)
	}
	if st := f.where("later-2"); st != job.Held {
		t.Errorf("hold with the token: job in %s", st)
	}
	shot(p2, "acted")
	t.Logf("whole test %s", time.Since(t0).Round(time.Millisecond))
}
