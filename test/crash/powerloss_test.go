package crash

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Power-loss enumeration bounds: combinations per cut before sampling.
const (
	plBoundCI    = 1024    // 2^10: every subset of up to 10 pending operations
	plBoundLong  = 1 << 20 // 2^20: no cut of the current scenarios has more
	plBoundShort = 16
	plBoundAudit = 64 // per cut, for each of the ~200 fsyncs taken out
)

func plBound(t *testing.T) int {
	switch {
	case os.Getenv("FARRO_CRASH_LONG") == "1":
		return plBoundLong
	case testing.Short():
		return plBoundShort
	}
	return plBoundCI
}

// plScratch returns a scratch directory removed at the end of the test: on
// tmpfs (/dev/shm) when there is one, so that the thousands of fsyncs of
// recording and recovery cost nothing and the run does not depend on how
// busy the disk is (the model, not the disk, decides what survives a power
// cut). FARRO_PL_SCRATCH overrides the parent directory.
func plScratch(t *testing.T) string {
	t.Helper()
	parent := os.Getenv("FARRO_PL_SCRATCH")
	if parent == "" {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			parent = "/dev/shm"
		}
	}
	if parent != "" {
		if d, err := os.MkdirTemp(parent, "farro-powerloss-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

func plRecordAll(t *testing.T) []*plLog {
	t.Helper()
	var logs []*plLog
	for _, sc := range plScenarios() {
		logs = append(logs, plRecord(t, sc))
	}
	return logs
}

// TestPowerLoss records the filesystem operations of every transaction
// (submit, claim, heartbeat, commit to each state, every operator and
// managerd move, watchdogd's recovery of each kind of half-done
// transaction, quarantine), rebuilds every state a power cut after each
// prefix of them could leave (see powerloss_model_test.go), runs recovery
// on each as a rebooted system would, and checks the invariants.
func TestPowerLoss(t *testing.T) {
	start := time.Now()
	logs := plRecordAll(t)
	if only := os.Getenv("FARRO_PL_ONLY"); only != "" {
		var keep []*plLog
		for _, l := range logs {
			if strings.HasPrefix(l.name, only) {
				keep = append(keep, l)
				if testing.Verbose() {
					for i, o := range l.ops {
						t.Logf("  [%d] %s", i, o.label)
					}
				}
			}
		}
		logs = keep
	}
	ops, implicit := 0, 0
	for _, l := range logs {
		ops += len(l.ops)
		implicit += l.implicit
	}
	run := newPLRun(plBound(t), runtime.GOMAXPROCS(0))
	run.check(plScratch(t), logs)
	for _, err := range run.errs {
		t.Error(err)
	}
	for _, n := range run.notes {
		t.Error(n)
	}
	t.Logf("powerloss: %d scenarios, %d operations recorded (%d inferred), bound %d combinations per cut, %d combinations enumerated, %d cuts sampled, at most %d relevant pending operations, %s",
		len(logs), ops, implicit, run.bound, run.enumerated, run.sampled, run.maxPending, time.Since(start).Round(time.Millisecond))
	if testing.Verbose() {
		for _, l := range logs {
			c := run.perLog[l.name]
			t.Logf("  %-40s %3d ops  violations=%d", l.name, len(l.ops), c.violations())
		}
	}
	line := run.summary()
	t.Log(line)
	fmt.Println(line)
	// The package's summary line (issue 3, item 6): same counts, its
	// names. An in-progress job left with a dead holder never becomes
	// terminal.
	c := run.counts
	summary.addPowerLoss(run.checked, violations{
		Lost: c.Lost, Duplicated: c.Duplicated, Unexpected: c.Unexpected, Unreadable: c.Unreadable,
		OrphanLocks: c.OrphanLocks, OrphanTemps: c.OrphanTemps, NotTerminal: c.Stuck,
	})
	summary.addPart(fmt.Sprintf("power_loss_prefixes=%d power_loss_regressed=%d", run.prefixes, c.Regressed))
	if run.counts.violations() > 0 {
		t.Errorf("power-loss invariants violated: %s", line)
	}
}

// TestPowerLossDetectsMissingFsync proves the model can fail: the same
// recordings with fsyncs taken out (as if the code did not make them) must
// show violations.
func TestPowerLossDetectsMissingFsync(t *testing.T) {
	cases := []struct {
		scenario string
		remove   []string // labels (prefixes) of the fsyncs to remove
		want     func(plCounts) bool
		what     string
	}{
		// submit without its second barrier: the rename into incoming/
		// need not reach the disk; the job stays in tmp/ and managerd's
		// sweep deletes it.
		{"submit/queued", []string{"syncfs#2"}, func(c plCounts) bool { return c.Lost > 0 }, "lost"},
		// submit without its first barrier: the job dir's files (job.json...)
		// need not reach the disk although the dir is renamed into incoming/.
		{"submit/queued", []string{"syncfs#1"}, func(c plCounts) bool { return c.Unreadable > 0 }, "unreadable"},
		// commit: the staged job.json is not made durable (first barrier)
		// before it replaces the old one.
		{"commit/succeeded", []string{"syncfs#1"}, func(c plCounts) bool { return c.Unreadable > 0 }, "unreadable"},
		// commit: without the second barrier neither the new job.json nor
		// the move need reach the disk: an acknowledged success comes back
		// as a job to run again.
		{"commit/succeeded", []string{"syncfs#2"}, func(c plCounts) bool { return c.Regressed > 0 }, "regressed"},
		// claim: the staged job.json replaces the old one before a barrier.
		{"claim/agent-dir-exists", []string{"syncfs#1"}, func(c plCounts) bool { return c.Unreadable > 0 }, "unreadable"},
	}
	scs := map[string]plScenario{}
	for _, sc := range plScenarios() {
		scs[sc.name] = sc
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.scenario+"/"+strings.Join(tc.remove, "+"), "/", "_"), func(t *testing.T) {
			l := plRecord(t, scs[tc.scenario])
			// Sanity: the intact log passes.
			ok := newPLRun(plBoundCI, runtime.GOMAXPROCS(0))
			ok.check(plScratch(t), []*plLog{l})
			if ok.counts.violations() > 0 {
				t.Fatalf("intact %s fails: %s\n%s", tc.scenario, ok.summary(), strings.Join(ok.notes, "\n"))
			}
			broken := l
			for _, label := range tc.remove {
				// "label#k": the k-th matching sync; else the last one.
				nth := 0
				if i := strings.LastIndexByte(label, '#'); i >= 0 {
					nth, _ = strconv.Atoi(label[i+1:])
					label = label[:i]
				}
				p, seen := -1, 0
				for i, o := range broken.ops {
					if o.syncs() && (o.label == label || strings.HasPrefix(o.label, label) && !strings.HasPrefix(o.label[len(label):], "/")) {
						if seen++; nth == 0 || seen == nth {
							p = i
						}
					}
				}
				if p < 0 {
					t.Fatalf("no fsync %q in %s", label, tc.scenario)
				}
				broken = broken.without(p)
			}
			run := newPLRun(plBoundCI, runtime.GOMAXPROCS(0))
			run.check(plScratch(t), []*plLog{broken})
			t.Logf("%s: %s", broken.name, run.summary())
			if testing.Verbose() && len(run.notes) > 0 {
				t.Logf("first finding: %s", run.notes[0])
			}
			if !tc.want(run.counts) {
				t.Errorf("%s went unnoticed (want %s): %s", broken.name, tc.what, run.summary())
			}
		})
	}
}

var plLabelNoise = regexp.MustCompile(`(\.job\.json|\.control\.json|\.quarantine\.json)\d+|(tmp/[A-Za-z0-9]+)\.[0-9a-f]{8}|\d{8}T\d{6}\.\d{6}Z|\.expired\.[0-9a-z]+`)

// TestPowerLossFsyncAudit (long mode, or FARRO_PL_AUDIT=1) takes out each
// fsync of each scenario in turn and reports whether the enumeration then
// finds a violation: which fsyncs farro's guarantees rest on, and which
// recovery makes redundant (job.json is the truth, so a lost move is rolled
// forward). It fails only if an fsync that TestPowerLossDetectsMissingFsync
// relies on stops mattering.
func TestPowerLossFsyncAudit(t *testing.T) {
	if os.Getenv("FARRO_CRASH_LONG") != "1" && os.Getenv("FARRO_PL_AUDIT") != "1" {
		t.Skip("long mode only (FARRO_CRASH_LONG=1 or FARRO_PL_AUDIT=1)")
	}
	type row struct {
		label      string
		scenarios  []string
		violations int
	}
	rows := map[string]*row{}
	removed := 0
	for _, sc := range plScenarios() {
		if strings.HasPrefix(sc.name, "lifecycle/") {
			continue // made of the single transactions audited one by one
		}
		l := plRecord(t, sc)
		for p, o := range l.ops {
			if !o.syncs() {
				continue
			}
			removed++
			// Cuts before p are those of the intact log, checked by
			// TestPowerLoss.
			run := newPLRun(plBoundAudit, runtime.GOMAXPROCS(0))
			run.from = p
			run.check(plScratch(t), []*plLog{l.without(p)})
			label := plLabelNoise.ReplaceAllStringFunc(o.label, func(m string) string {
				switch {
				case strings.HasPrefix(m, "tmp/"):
					return m[:strings.LastIndexByte(m, '.')] + ".<rand>"
				case strings.HasPrefix(m, "."):
					return strings.TrimRight(m, "0123456789") + "<rand>"
				}
				return "<stamp>"
			})
			r := rows[label]
			if r == nil {
				r = &row{label: label}
				rows[label] = r
			}
			r.violations += run.counts.violations()
			if run.counts.violations() > 0 {
				r.scenarios = append(r.scenarios, sc.name)
			}
		}
	}
	var labels []string
	for l := range rows {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	needed := 0
	for _, l := range labels {
		r := rows[l]
		verdict := "redundant under this model"
		if r.violations > 0 {
			verdict = fmt.Sprintf("NEEDED: %d violations without it (%s)", r.violations, strings.Join(plUniq(r.scenarios), ", "))
			needed++
		}
		t.Logf("%-60s %s", l, verdict)
	}
	t.Logf("fsync audit: %d fsyncs taken out one at a time, %d distinct fsync sites, %d needed", removed, len(rows), needed)
	for _, must := range []string{"fsync-dir incoming", "fsync-dir tmp/A.<rand>", "fsync in-progress/a1/A/.job.json<rand>"} {
		if r := rows[must]; r == nil || r.violations == 0 {
			t.Errorf("taking out %q went unnoticed", must)
		}
	}
}

func plUniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
