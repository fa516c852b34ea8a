package crawl_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/logx/logxtest"
	"github.com/farro-dev/farro/internal/politeness"
	"github.com/farro-dev/farro/internal/realsite"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/pkg/job"
)

// TestOnePolitenessPerHost: two crawls and three source checks of one
// host, all at once, with the real daemons, against a private nginx: from
// nginx's access log, no two requests to the host (pages, robots.txt,
// sitemaps, checks, whoever made them) closer than the interval they all
// ask, and every party did make requests. With a gate per crawl and
// another for the checks, their requests land next to each other. A FIFO
// planted at the host's gate is moved aside and logged, blocking nobody.
func TestOnePolitenessPerHost(t *testing.T) {
	bin := binaries(t)
	if why := realsite.Available(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("real-site test bed: %s (.ci/run installs them)", why)
		}
		t.Skipf("real-site test bed: %s (apt-get install nginx-light wget %s)", why, realsite.Package)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // nginx's workers run as nobody
		t.Fatal(err)
	}
	ng, err := realsite.Start(filepath.Join(dir, "nginx"), realsite.DocRoot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ng.Stop)

	const interval = 200 * time.Millisecond
	// nginx logs with millisecond stamps when a response is done (a small
	// static page: within a few ms of its request on an idle host).
	const tolerance = 40 * time.Millisecond
	ms := fmt.Sprint(interval.Milliseconds()) + "ms"
	start := time.Now()
	f := newFarro(t, bin, dir)
	// A FIFO where the host's gate goes: moved aside by the first request
	// (and logged), never blocking anyone.
	host, _, err := crawl.DomainOf(ng.URL("/"))
	if err != nil {
		t.Fatal(err)
	}
	gates := politeness.Open(f.spool)
	if err := os.MkdirAll(filepath.Dir(gates.Path(host)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(gates.Path(host), 0o644); err != nil {
		t.Fatal(err)
	}
	f.startWatchdog()
	f.startManager()
	f.startAgents(2, 8)
	crawlArgs := func(name, seed string) []string {
		return []string{"crawl", "start", name, "--seed", ng.URL(seed), "--allow-private", "--user-agent", "farro-" + name + "/1.0",
			"--scope", "host", "--delay", ms, "--jitter", "0s", "--max-pages", "3"}
	}
	checks := []string{"/preface.html", "/history.html", "/intro-whatis.html"}
	for i, p := range checks {
		f.ctl("source", "add", ng.URL(p), "--name", fmt.Sprintf("s%d", i), "--every", "1h", "--allow-private",
			"--user-agent", "farro-check/1.0", "--timeout", "5s")
	}
	f.ctl(crawlArgs("a", realsite.Seed)...)
	f.ctl(crawlArgs("b", "/sql.html")...)
	f.ctl("pipeline", "check", "--min-domain-interval", ms, "--max-domain-requests", "0")
	f.waitState("a", crawl.Done, 30*time.Second)
	f.waitState("b", crawl.Done, 30*time.Second)
	sp := &job.Spool{Root: f.spool}
	deadline := time.Now().Add(30 * time.Second)
	for i := range checks {
		for {
			s, err := source.Load(sp, fmt.Sprintf("s%d", i))
			if err == nil && s.LastCheckedAt != nil {
				if s.Checks != 1 {
					t.Errorf("source s%d: %d checks, error %q", i, s.Checks, s.LastError)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("source s%d not checked after 30s: %+v %v", i, s, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	log, err := ng.Log()
	if err != nil {
		t.Fatal(err)
	}
	sort.SliceStable(log, func(i, j int) bool { return log[i].At < log[j].At })
	by := map[string]int{}
	for _, r := range log {
		by[r.UA]++
	}
	for _, ua := range []string{"farro-a/1.0", "farro-b/1.0", "farro-check/1.0"} {
		if by[ua] < 3 {
			t.Errorf("%s made %d requests, want at least 3 (all: %v)", ua, by[ua], by)
		}
	}
	var tooClose []string
	for i := 1; i < len(log); i++ {
		gap := time.Duration((log[i].At - log[i-1].At) * float64(time.Second))
		if gap < interval-tolerance {
			tooClose = append(tooClose, fmt.Sprintf("%s %s then %s %s: %s apart", log[i-1].UA, log[i-1].URI, log[i].UA, log[i].URI, gap.Round(time.Millisecond)))
		}
	}
	if len(tooClose) > 0 {
		t.Errorf("%d of %d consecutive requests to the host closer than %s:\n%s", len(tooClose), len(log)-1, interval, strings.Join(tooClose, "\n"))
	}
	// Every line the agents logged is one strict JSON object; one of
	// them says the FIFO was moved aside.
	warned := 0
	for _, a := range f.agents {
		b, err := os.ReadFile(filepath.Join(dir, "logs", a.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		_, problems := logxtest.Scan(b)
		for _, p := range problems {
			t.Errorf("%s line %d: %v: %s", a.name, p.Line, p.Err, p.Text)
		}
		warned += strings.Count(string(b), `"a file at a politeness gate's path is not a gate"`)
	}
	aside, _ := filepath.Glob(gates.Path(host) + "@bad-*")
	if warned != 1 || len(aside) != 1 {
		t.Errorf("the FIFO at the gate: %d warnings logged, moved aside to %v; want one of each", warned, aside)
	} else if fi, err := os.Lstat(aside[0]); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("moved aside: %v %v, want the FIFO", fi, err)
	}
	t.Logf("%d requests to the host (%v) in %s from the daemons' start, %d closer than %s - %s", len(log), by,
		time.Since(start).Round(time.Millisecond), len(tooClose), interval, tolerance)
}
