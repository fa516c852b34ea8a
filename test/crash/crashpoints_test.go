package crash

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCrashPoints runs the lifecycle scenario once per crash point, with
// the point armed in the process kind that reaches it: the process
// SIGKILLs itself there, is restarted like systemd would, recovery runs,
// and once the cluster is quiet the checker must count no violation. It
// fails if a point is not reached by its scenario.
//
// FARRO_CRASH_ONLY=<regexp> runs only the matching points (for
// diagnosis); FARRO_CRASH_PAR sets how many scenarios run at once
// (default 8: they mostly wait). The scenarios' spools live on tmpfs
// (/dev/shm) when there is one: a process crash does not depend on fsync,
// and the IO of fsyncs is most of what a scenario costs on a disk
// (FARRO_CRASH_TMP=<dir> chooses another place).
func TestCrashPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemons once per crash point; skipped with -short")
	}
	t.Parallel()
	bin := crashBinaries(t)
	// watchdogd's scenarios first: a watchdogd killed inside a recovery
	// leaves its recovery guard, which the next one takes over only after
	// job.RecoveryGuardTimeout, so they are the longest.
	cases := pointCases()
	sort.SliceStable(cases, func(i, j int) bool { return cases[i].kind == "watchdogd" && cases[j].kind != "watchdogd" })
	var only *regexp.Regexp
	if s := os.Getenv("FARRO_CRASH_ONLY"); s != "" {
		only = regexp.MustCompile(s)
	}
	par := 8
	if n, err := strconv.Atoi(os.Getenv("FARRO_CRASH_PAR")); err == nil && n > 0 {
		par = n
	}
	sites := callSites(t)
	base := scenarioBase()

	var (
		mu        sync.Mutex
		exercised = map[string]bool{}
		reached   = map[string]bool{} // every point name reached in any process
		total     violations
		kills     int
	)
	start := time.Now()
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	ran := 0
	for _, pc := range cases {
		if only != nil && !only.MatchString(pc.name()) {
			continue
		}
		ran++
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t.Run(pc.name(), func(t *testing.T) {
				c := newClusterIn(t, bin, base)
				for _, s := range pc.setup {
					c.arm(s.kind, s.point)
				}
				c.arm(pc.kind, pc.point)
				runLifecycle(c, lifecycleOptions{retention: pc.retention})
				fired := c.fired()
				for _, s := range append(append([]pointCase(nil), pc.setup...), pc) {
					if fired[s.point] == 0 {
						t.Errorf("crash point %s was not reached by its scenario (%s)", s.point, s.kind)
					}
				}
				rep := checkSpool(c.spool, c.records, c.ledger)
				if os.Getenv("FARRO_CRASH_DEBUG") == "1" {
					dumpJobs(t, c.spool, c.records)
				}
				reportViolations(t, c, rep)
				tr, _ := os.ReadFile(c.trace)
				mu.Lock()
				defer mu.Unlock()
				if fired[pc.point] > 0 {
					exercised[pc.kind+":"+pc.point] = true
				}
				for _, name := range strings.Fields(string(tr)) {
					if !strings.HasPrefix(name, "!") {
						reached[name] = true
					}
				}
				total.add(rep.violations)
				kills += c.killCount()
				summary.addScenario(c.killCount(), rep.jobs, rep.violations)
			})
		}()
	}
	wg.Wait()
	if only == nil {
		summary.addPoints(len(cases), len(exercised))
	}
	// Every point reached anywhere must be a call site the registry
	// covers (a qualifier variant without a scenario of its own is fine:
	// its call site has one).
	var unknown []string
	for name := range reached {
		if !sites[basePoint(name)] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("points reached that no call site declares: %v", unknown)
	}
	t.Logf("crash points: %d scenarios, %d points exercised of %d known, %d distinct points reached in all, %d kills, %s, in %s",
		ran, len(exercised), len(cases), len(reached), kills, total, time.Since(start).Round(time.Second))
}

// TestCrashPointRegistry checks the registry against the code: every
// fsq.CrashPoint call site has at least one scenario, and every scenario
// names a call site.
func TestCrashPointRegistry(t *testing.T) {
	sites := callSites(t)
	if len(sites) < 20 {
		t.Fatalf("found only %d crash point call sites: is the source scan broken?", len(sites))
	}
	covered := map[string]bool{}
	seen := map[string]bool{}
	for _, pc := range pointCases() {
		for _, p := range append(append([]pointCase(nil), pc.setup...), pc) {
			b := basePoint(p.point)
			if !sites[b] {
				t.Errorf("registry point %s (%s) matches no fsq.CrashPoint call site", p.point, b)
			}
		}
		if seen[pc.name()] {
			t.Errorf("scenario %s listed twice", pc.name())
		}
		seen[pc.name()] = true
		covered[basePoint(pc.point)] = true
	}
	var missing []string
	for s := range sites {
		if !covered[s] {
			missing = append(missing, s)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("crash points in the code that no scenario reaches: %v", missing)
	}
	t.Logf("%d call sites, %d scenarios", len(sites), len(pointCases()))
}

var callSitePattern = regexp.MustCompile(`CrashPoint\("([^"]+)"`)

// callSites scans the repository's non-test Go code for fsq.CrashPoint
// calls and returns their (unqualified) point names.
func callSites(t testing.TB) map[string]bool {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	sites := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "test", "spool", "bin", "bench", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			for _, m := range callSitePattern.FindAllStringSubmatch(line, -1) {
				sites[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sites
}

// TestReleaseBuildHasNoCrashPoints checks that binaries built without the
// farro_crashpoints tag contain no crash-point or event-dropping code (not
// even the names of their environment variables), and that
// FARRO_CRASH_POINT set on one of them does nothing; and that the tagged
// build does fire.
func TestReleaseBuildHasNoCrashPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; skipped with -short")
	}
	release, tagged := binaries(t), crashBinaries(t)
	for _, name := range []string{"agentd", "managerd", "watchdogd", "farroctl"} {
		b, err := os.ReadFile(filepath.Join(release, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"FARRO_CRASH_POINT", "FARRO_DROP_EVENTS"} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("release %s contains crash-point code (%s)", name, s)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(tagged, name)); !bytes.Contains(b, []byte("FARRO_CRASH_POINT")) {
			t.Errorf("tagged %s lacks the crash-point code", name)
		}
	}
	for _, tc := range []struct {
		bin       string
		wantCrash bool
	}{{release, false}, {tagged, true}} {
		c := newCluster(t, tc.bin)
		c.arm("farroctl", "submit/rename:before")
		r := c.ctlOnce("submit", "--id", "j1", "--kind", "noop", writePrompt(t, c, "j1", `{}`))
		if r.crashed != tc.wantCrash {
			t.Errorf("%s: farroctl submit with FARRO_CRASH_POINT=submit/rename:before: crashed=%v, want %v (exit %d, %s)",
				filepath.Base(tc.bin), r.crashed, tc.wantCrash, r.code, r.stderr)
		}
		if !tc.wantCrash && (r.code != 0 || r.stdout != "j1") {
			t.Errorf("release farroctl submit: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if got := c.fired()["submit/rename:before"]; (got > 0) != tc.wantCrash {
			t.Errorf("%s: crash mark written %d times", filepath.Base(tc.bin), got)
		}
	}
}

func writePrompt(t testing.TB, c *cluster, id, prompt string) string {
	t.Helper()
	p := filepath.Join(c.dir, "prompts", id+".json")
	if err := os.WriteFile(p, []byte(prompt), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// String renders a pointCase for messages.
func (p pointCase) String() string { return fmt.Sprintf("%s in %s", p.point, p.kind) }

// scenarioBase is where the crash-point scenarios keep their spools:
// FARRO_CRASH_TMP, else /dev/shm if it is a writable directory, else the
// system's temp dir.
func scenarioBase() string {
	if d := os.Getenv("FARRO_CRASH_TMP"); d != "" {
		return d
	}
	if f, err := os.CreateTemp("/dev/shm", "farro-probe-"); err == nil {
		f.Close()
		os.Remove(f.Name())
		return "/dev/shm"
	}
	return ""
}
