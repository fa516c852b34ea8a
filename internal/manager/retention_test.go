package manager

import (
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/farro-dev/farro/internal/metrics"
	"github.com/farro-dev/farro/pkg/job"
)

// retentionRemoved reads farro_retention_removed_total{state=st} from
// managerd's registry.
func retentionRemoved(t *testing.T, st job.State) float64 {
	t.Helper()
	mfs, err := metrics.Registry(metrics.Managerd).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "farro_retention_removed_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, "state", string(st)) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("farro_retention_removed_total{state=%q} not exported", st)
	return 0
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// oldTerminal makes a succeeded and a killed job that finished at
// finished.
func (e *env) oldTerminal(t *testing.T, succeeded, killed string, finished time.Time) {
	t.Helper()
	if succeeded != "" {
		e.submit(t, succeeded, 0)
		c, err := e.s.Claim(succeeded, holder)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(job.Succeeded, "", nil); err != nil {
			t.Fatal(err)
		}
		e.patch(t, job.Succeeded, succeeded, func(j *job.Job) { j.FinishedAt = &finished })
		e.age(t, job.Succeeded, succeeded, finished)
	}
	if killed != "" {
		e.submit(t, killed, 0)
		if _, err := e.s.Move(killed, job.Queued, job.Killed, "test", "cancelled", nil); err != nil {
			t.Fatal(err)
		}
		e.patch(t, job.Killed, killed, func(j *job.Job) { j.FinishedAt = &finished })
		e.age(t, job.Killed, killed, finished)
	}
}

// age sets the mtime of job id's directory to at: a job's directory is
// last modified when it finishes (its job.json replaced), which the
// patches that backdate a finish do not do by themselves.
func (e *env) age(t *testing.T, st job.State, id string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(e.s.JobDir(st, "", id), at, at); err != nil {
		t.Fatal(err)
	}
}

// One retention scan looks at no more than RetentionChunk entries of a
// directory; the next scans go on from there until every old job is
// gone. A job whose directory changed after the cutoff is not read.
func TestRetentionIsBoundedPerScan(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Retention: time.Hour, RetentionChunk: 2})
	old := time.Now().Add(-3 * time.Hour)
	for _, id := range []string{"s1", "s2", "s3", "s4", "s5"} {
		e.oldTerminal(t, id, "", old)
	}
	left := func() int { return len(ls(t, e.s.StateDir(job.Succeeded))) }
	for pass := 1; left() > 0; pass++ {
		before := left()
		e.m.lastRetain = time.Time{}
		e.runOnce(t)
		if removed := before - left(); removed > 2 {
			t.Fatalf("pass %d removed %d jobs, want at most RetentionChunk (2)", pass, removed)
		}
		if pass > 4 {
			t.Fatalf("%d old jobs left after %d passes", left(), pass)
		}
	}
}

// One info line per pass that removed anything (how many, by state, the
// oldest), never one per job, and the counter by state. Not parallel: it
// reads a process-wide counter, which the parallel tests (run after it)
// also move.
func TestRetentionLogsOnceAndCounts(t *testing.T) {
	e := setup(t, Config{Retention: time.Hour})
	oldest := time.Now().Add(-5 * time.Hour).UTC().Truncate(time.Second)
	e.oldTerminal(t, "s1", "k1", oldest)
	e.oldTerminal(t, "s2", "", time.Now().Add(-2*time.Hour))
	e.oldTerminal(t, "s3", "k3", time.Now()) // young: kept
	beforeS, beforeK := retentionRemoved(t, job.Succeeded), retentionRemoved(t, job.Killed)
	e.runOnce(t)
	if got := retentionRemoved(t, job.Succeeded) - beforeS; got != 2 {
		t.Errorf("farro_retention_removed_total{state=succeeded} moved by %v, want 2", got)
	}
	if got := retentionRemoved(t, job.Killed) - beforeK; got != 1 {
		t.Errorf("farro_retention_removed_total{state=killed} moved by %v, want 1", got)
	}
	var info []map[string]any
	for _, l := range e.log.Lines(t) {
		if l["level"] == "info" && strings.HasPrefix(l["message"].(string), "retention") {
			info = append(info, l)
		}
	}
	if len(info) != 1 {
		t.Fatalf("%d retention info lines, want 1: %v", len(info), info)
	}
	l := info[0]
	if l["removed"] != 3.0 || l["succeeded"] != 2.0 || l["killed"] != 1.0 || l["retention_s"] != 3600.0 {
		t.Errorf("retention line %v: want removed 3 (succeeded 2, killed 1), retention_s 3600", l)
	}
	if s, _ := l["oldest_finished_at"].(string); s == "" || !mustTime(s).Equal(oldest) {
		t.Errorf("oldest_finished_at %v, want %v", l["oldest_finished_at"], oldest)
	}
	e.where(t, "s3")
	e.where(t, "k3")

	// A pass that removes nothing says nothing at info level.
	e.m.lastRetain = time.Time{}
	n := len(e.log.Lines(t))
	e.runOnce(t)
	for _, l := range e.log.Lines(t)[n:] {
		if l["level"] != "debug" {
			t.Errorf("a pass that removed nothing logged %v", l)
		}
	}
}

// The scan reads without the lock: a job an operator retried between the
// scan's read and the removal, and one that ran again and finished
// meanwhile, are not deleted.
func TestRetentionKeepsAJobMovedMeanwhile(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Retention: time.Hour})
	old := time.Now().Add(-3 * time.Hour)
	e.oldTerminal(t, "", "retried", old)
	e.oldTerminal(t, "rerun", "", old)
	e.oldTerminal(t, "gone", "", old)
	e.m.beforeExpire = func(id string) {
		switch id {
		case "retried": // back in incoming/, queued
			if _, err := e.s.Retry(id, "farroctl", false); err != nil {
				t.Fatal(err)
			}
		case "rerun": // retried, ran, and succeeded again just now: back in succeeded/
			if _, err := e.s.Retry(id, "farroctl", true); err != nil {
				t.Fatal(err)
			}
			c, err := e.s.Claim(id, holder)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Commit(job.Succeeded, "", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.runOnce(t)
	if st, _ := e.where(t, "retried"); st != job.Queued {
		t.Errorf("retried job is %s, want queued", st)
	}
	if st, _ := e.where(t, "rerun"); st != job.Succeeded {
		t.Errorf("re-run job is %s, want succeeded", st)
	}
	if _, err := e.s.Locate("gone"); err == nil {
		t.Errorf("the old job nobody touched survived retention")
	}
	if got := ls(t, e.s.StateDir(job.Queued)); len(got) != 1 || got[0] != "retried" {
		t.Errorf("incoming/ holds %v, want only the retried job (no lock left behind)", got)
	}
	for _, l := range e.log.Lines(t) {
		if l["level"] == "info" && strings.HasPrefix(l["message"].(string), "retention") && l["removed"] != 1.0 {
			t.Errorf("retention line %v, want removed 1", l)
		}
	}
}

func mustTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339, s)
	return t
}
