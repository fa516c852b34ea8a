// Package pipeline_test runs the content pipeline end to end with the
// real binaries (managerd with its frontier, agentd, watchdogd, farroctl)
// against a live loopback site served by the test, and SIGKILLs the
// daemons in the middle of a run.
package pipeline_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/pipeline/livesite"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/internal/testbin"
	"github.com/farro-dev/farro/pkg/job"
)

var bins = &testbin.Set{Prefix: "farro-pipeline-bin-", Pkgs: []string{"./cmd/..."}}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func start(t *testing.T, dir, name string, env []string, args ...string) *proc {
	t.Helper()
	out, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Env = out, out, append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); out.Close(); close(p.done) }()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

type farro struct {
	t          *testing.T
	bin, dir   string
	spool      string
	env        []string
	daemons    []*proc
	generation int
}

func (f *farro) startDaemons() {
	f.generation++
	g := strconv.Itoa(f.generation)
	f.daemons = []*proc{
		start(f.t, f.dir, "managerd-"+g, f.env, f.bin+"/managerd", "--backoff-base", "20ms", "--backoff-max", "200ms", "--rescan", "1s"),
		start(f.t, f.dir, "watchdogd-"+g, f.env, f.bin+"/watchdogd", "--interval", "100ms"),
	}
	for _, id := range []string{"w1", "w2"} {
		f.daemons = append(f.daemons, start(f.t, f.dir, "agentd-"+id+"-"+g, f.env, f.bin+"/agentd", "--id", id,
			"--concurrency", "3", "--heartbeat", "200ms", "--rescan", "1s"))
	}
}

func (f *farro) killDaemons() {
	for _, p := range f.daemons {
		p.kill()
	}
	f.daemons = nil
}

func (f *farro) ctl(args ...string) string {
	f.t.Helper()
	cmd := exec.Command(f.bin+"/farroctl", append([]string{"--spool", f.spool}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		f.t.Fatalf("farroctl %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func (f *farro) sources() map[string]*source.Source {
	f.t.Helper()
	m := map[string]*source.Source{}
	for _, line := range strings.Split(strings.TrimSpace(f.ctl("source", "ls", "--json")), "\n") {
		var s source.Source
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			f.t.Fatalf("source ls --json: %v: %q", err, line)
		}
		m[s.Name] = &s
	}
	return m
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPipelineKillDaemons registers sources on three hosts, runs the
// pipeline with the real daemons, SIGKILLs managerd, watchdogd and both
// agents twice during the run (while checks are spaced out, and while
// the acquisitions crawl), restarts them, and checks that nothing was
// lost: every source checked once and acquired once, every page of every
// source fetched, no job killed, fsck clean.
func TestPipelineKillDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemons; skipped with -short")
	}
	bin := bins.Dir(t)
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	if _, err := job.Open(spool); err != nil {
		t.Fatal(err)
	}
	f := &farro{t: t, bin: bin, dir: dir, spool: spool, env: []string{"FARRO_SPOOL=" + spool}}
	site := livesite.Start()
	defer site.Close()
	hosts := []string{"a.test", "b.test", "c.test"}
	modes := []livesite.Mode{livesite.ETag, livesite.LastModified, livesite.HashOnly}
	type want struct{ host, path string }
	var pages []want
	n := 0
	for i, h := range hosts {
		site.SetMode(h, modes[i])
		for _, s := range []string{"s1", "s2", "s3"} {
			root := "/" + s + "/"
			site.Set(h, root, livesite.Page(h+root, root+"p1", root+"p2"))
			site.Set(h, root+"p1", livesite.Page("p1", root+"p2"))
			site.Set(h, root+"p2", livesite.Page("p2"))
			pages = append(pages, want{h, root}, want{h, root + "p1"}, want{h, root + "p2"})
			name := strings.ReplaceAll(h, ".", "-") + "-" + s
			f.ctl("source", "add", site.URL(h, root), "--name", name, "--scope", "prefix", "--every", "1h",
				"--delay", "50ms", "--allow-private", "--resolve", site.Resolve(h), "--timeout", "5s")
			n++
		}
	}
	// Each host's 3 checks and 9 pages are more than a run's default cap
	// of 10 requests to a domain (which would leave pages for later
	// runs): this test is about kills, so the cap is off.
	dry := f.ctl("pipeline", "run", "--dry-run", "--min-domain-interval", "400ms", "--max-domain-requests", "0")
	if strings.Count(dry, "planned") != n {
		t.Fatalf("dry run plans %d checks, want %d:\n%s", strings.Count(dry, "planned"), n, dry)
	}
	f.startDaemons()
	out := f.ctl("pipeline", "run", "--min-domain-interval", "400ms", "--max-domain-requests", "0", "--json")
	var rep struct {
		Checks []struct{ Status string } `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Checks) != n {
		t.Fatalf("run: %v\n%s", err, out)
	}
	t0 := time.Now()
	// Kill during the checks (spaced 400ms per domain: 0.8s for all).
	waitFor(t, "a first check", 20*time.Second, func() bool { return site.Count("", "", 0) > 0 })
	f.killDaemons()
	f.startDaemons()
	// Kill again while the acquisitions crawl.
	waitFor(t, "a first acquisition", 20*time.Second, func() bool {
		for _, s := range f.sources() {
			if s.Acquisitions > 0 {
				return true
			}
		}
		return false
	})
	f.killDaemons()
	f.startDaemons()
	// A second run meanwhile must not check anything twice.
	f.ctl("pipeline", "run", "--min-domain-interval", "400ms", "--max-domain-requests", "0")
	waitFor(t, "every source acquired and crawled", 60*time.Second, func() bool {
		for _, s := range f.sources() {
			if s.Acquisitions != 1 {
				return false
			}
			st, _ := crawl.Open(&job.Spool{Root: spool}, s.Crawl)
			c, err := st.Load()
			if err != nil || c.State != crawl.Done {
				return false
			}
		}
		return true
	})
	elapsed := time.Since(t0)
	for name, s := range f.sources() {
		if s.Checks != 1 || s.LastOutcome != source.First || s.AcquirePending || s.ConsecutiveFailures != 0 {
			t.Errorf("%s: checks %d outcome %s pending %v failures %d", name, s.Checks, s.LastOutcome, s.AcquirePending, s.ConsecutiveFailures)
		}
	}
	for _, p := range pages {
		if site.Count(p.host, p.path, 200) == 0 {
			t.Errorf("%s%s never fetched", p.host, p.path)
		}
	}
	waitFor(t, "no live job", 20*time.Second, func() bool {
		return !strings.Contains(f.ctl("stats", "--json"), `"queued":1`) && jobsLive(t, spool) == 0
	})
	if k := countDir(t, filepath.Join(spool, "completed", "killed")); k != 0 {
		t.Errorf("%d jobs killed", k)
	}
	f.killDaemons()
	if out := f.ctl("fsck"); strings.TrimSpace(out) != "" && !strings.Contains(out, "clean") {
		t.Logf("fsck: %s", out)
	}
	t.Logf("%d sources, %d pages: checked and acquired in %s with two kills of every daemon; %d requests to the site",
		n, len(pages), elapsed.Round(time.Millisecond), len(site.Log()))
}

func countDir(t *testing.T, dir string) int {
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") && !strings.HasSuffix(e.Name(), job.LockSuffix) {
			n++
		}
	}
	return n
}

func jobsLive(t *testing.T, spool string) int {
	n := 0
	for _, d := range []string{"incoming", "deferred", "held", "stale", "completed/failed"} {
		n += countDir(t, filepath.Join(spool, d))
	}
	agents, _ := os.ReadDir(filepath.Join(spool, "in-progress"))
	for _, a := range agents {
		n += countDir(t, filepath.Join(spool, "in-progress", a.Name()))
	}
	return n
}
