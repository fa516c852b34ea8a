package main

import (
	"strings"
	"testing"

	"github.com/farro-dev/farro/bench/internal/report"
)

func findGoal(t *testing.T, r *report.Report, col, label string) report.Goal {
	t.Helper()
	var found []report.Goal
	for _, g := range r.Goals {
		if g.Col == col && g.Label == label {
			found = append(found, g)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s %q: %d goal rows, want 1 (goals: %+v)", col, label, len(found), r.Goals)
	}
	return found[0]
}

func wantMeasured(t *testing.T, g report.Goal, value string, met bool) {
	t.Helper()
	if !g.Known || g.Value != value || g.Met != met {
		t.Fatalf("%s %q: known %v value %q met %v, want %q met %v", g.Col, g.Label, g.Known, g.Value, g.Met, value, met)
	}
}

func wantUnmeasured(t *testing.T, g report.Goal, reason string) {
	t.Helper()
	if g.Known || !strings.Contains(g.Reason, reason) {
		t.Fatalf("%s %q: known %v reason %q, want not measured because %q", g.Col, g.Label, g.Known, g.Reason, reason)
	}
}

func TestGoalsSmokeListsEveryGoal(t *testing.T) {
	t.Parallel()
	cfg := config{mode: "smoke", scale: []int{500}}
	r := report.New()
	r.Cols = []string{"root"}
	for k, v := range map[string]float64{
		"farro1x4": 1000, "floor-group16": 2000,
		"pick-farro": 9, "pick-farro.p50": 4,
		"ins-start-ms": 3, "ins-hello-ms": 1.5, "ins-batch": 600, "ins-many": 900,
		"rec-farro": 0.4,
	} {
		r.SetNum(k, "root", v)
	}
	r.SetNum("sc-rss", "500", 20)
	goals(cfg, r, []column{{key: "root"}})

	wantMeasured(t, findGoal(t, r, "root", "durable throughput farro / group-commit floor"), "0.50x", false)
	wantMeasured(t, findGoal(t, r, "root", "pickup p50 farro (to exec handler start)"), "4.00 ms", true)
	wantMeasured(t, findGoal(t, r, "root", "insert: farroctl --version wall per run / minimal Go binary's"), "2.00x", false)
	wantMeasured(t, findGoal(t, r, "root", "recovery p99 farro"), "0.40 s", true)
	wantMeasured(t, findGoal(t, r, "root", "scale: largest daemon RSS at 500"), "20.0 MiB", true)
	for _, label := range []string{
		"durable throughput farro / River tuned (PostgreSQL)",
		"durable throughput farro / River SQLite tuned",
		"durable throughput farro / asynq default (AOF always)",
		"pickup p99 farro / River tuned (PostgreSQL) p99",
		"pickup p99 farro / River SQLite tuned p99",
		"insert: farroctl submit --batch / River InsertMany (PostgreSQL)",
		"insert: Spool.SubmitMany / River InsertMany (PostgreSQL)",
		"insert: Spool.SubmitMany / River SQLite InsertMany",
	} {
		wantUnmeasured(t, findGoal(t, r, "root", label), "peers not run")
	}
	wantUnmeasured(t, findGoal(t, r, "root", "throughput with every guarantee of docs/RELIABILITY.md"), "test/crash")
	wantUnmeasured(t, findGoal(t, r, "root", "scale: each daemon's peak RSS at 1M queued"), "1M not run (-scale up to 500")
	wantUnmeasured(t, findGoal(t, r, "root", "scale: Spool.Claim p50 at 1M / at 1k"), "1M not run")
	for _, s := range scaleGoalLabels {
		findGoal(t, r, "root", s.label)
	}
}

func TestGoalsWithPeersPerFilesystem(t *testing.T) {
	t.Parallel()
	cfg := config{mode: "full", peers: true, scale: []int{1000, 100000}}
	r := report.New()
	r.Cols = []string{"root", "journal"}
	for _, col := range r.Cols {
		for k, v := range map[string]float64{
			"farro1x4": 1000, "river-tuned": 2000, "riversqlite-tuned": 500, "asynq-default": 1000,
			"pick-farro": 5, "pick-river-tuned": 4, "pick-riversqlite-tuned": 10,
			"ins-batch": 600, "ins-many": 100, "ins-riverm": 50000, "ins-riversqlite-m": 1000,
		} {
			r.SetNum(k, col, v)
		}
	}
	r.SetNum("sc-claim", "1k", 0.3)
	r.SetNum("sc-claim", "100k", 0.4)
	goals(cfg, r, []column{{key: "root"}, {key: "journal"}})

	for _, col := range r.Cols {
		wantMeasured(t, findGoal(t, r, col, "durable throughput farro / River tuned (PostgreSQL)"), "0.50x", false)
		wantMeasured(t, findGoal(t, r, col, "durable throughput farro / River SQLite tuned"), "2.00x", true)
		wantMeasured(t, findGoal(t, r, col, "durable throughput farro / asynq default (AOF always)"), "1.00x", true)
		wantMeasured(t, findGoal(t, r, col, "pickup p99 farro / River tuned (PostgreSQL) p99"), "1.25x", false)
		wantMeasured(t, findGoal(t, r, col, "pickup p99 farro / River SQLite tuned p99"), "0.50x", true)
		wantMeasured(t, findGoal(t, r, col, "insert: farroctl submit --batch / River SQLite InsertMany"), "0.60x", true)
		wantMeasured(t, findGoal(t, r, col, "insert: Spool.SubmitMany / River InsertMany (PostgreSQL)"), "0.00x", false)
		wantUnmeasured(t, findGoal(t, r, col, "durable throughput farro / asynq tuned (AOF always)"), "figure missing")
	}
	wantMeasured(t, findGoal(t, r, "root", "scale: Spool.Claim p50 at 100k / at 1k"), "1.33x", true)
	wantUnmeasured(t, findGoal(t, r, "root", "scale: Spool.Claim p50 at 1M / at 1k"), "1M not run (-scale up to 100k")
	for _, s := range scaleGoalLabels {
		wantUnmeasured(t, findGoal(t, r, "journal", s.label), "scale runs on the root column only")
	}
}

func TestGoalsAtOneMillion(t *testing.T) {
	t.Parallel()
	cfg := config{mode: "full", scale: []int{1000, 1000000}, parts: map[string]bool{"scale": true}}
	r := report.New()
	r.Cols = []string{"root"}
	r.SetNum("sc-claim", "1k", 0.3)
	r.SetNum("sc-claim", "1M", 0.6)
	r.SetNum("sc-rss", "1M", 70)
	r.SetNum("sc-done-rss", "1M", 30)
	goals(cfg, r, []column{{key: "root"}})

	wantMeasured(t, findGoal(t, r, "root", "scale: Spool.Claim p50 at 1M / at 1k"), "2.00x", false)
	wantMeasured(t, findGoal(t, r, "root", "scale: each daemon's peak RSS at 1M queued"), "70.0 MiB", false)
	wantUnmeasured(t, findGoal(t, r, "root", "durable throughput farro / River SQLite tuned"), "not in -only")
	wantUnmeasured(t, findGoal(t, r, "root", "scale: watchdogd recovers a dead agent's job during its startup pass at 1M"), "figure missing")
	wantUnmeasured(t, findGoal(t, r, "root", "scale: first claim, in priority order, within 1 s of agentd start at 1M"), "figure missing")
	wantUnmeasured(t, findGoal(t, r, "root", "scale: no periodic pass is O(all jobs) at 1M"), "figure missing")
}

// scaleFigures records the probes' figures of one scale column: the
// priority job's claim (ms, and whether it was agentd's first), the dead
// agent's job recovered and the startup pass done (ms), and the five idle
// CPU figures (ms per s) in idleFigures' order.
func scaleFigures(r *report.Report, col string, prioMs float64, first bool, recoverMs, passMs float64, idle ...float64) {
	r.SetNum("sc-prio", col, prioMs)
	r.SetNum("sc-prio-first", col, b2f(first))
	r.SetNum("sc-wd-recover", col, recoverMs)
	r.SetNum("sc-wd-pass", col, passMs)
	for i, f := range idleFigures {
		r.SetNum(f.key, col, idle[i])
	}
}

const (
	prioLabel    = "scale: first claim, in priority order, within 1 s of agentd start at 1M"
	recoverLabel = "scale: watchdogd recovers a dead agent's job during its startup pass at 1M"
	idleLabel    = "scale: no periodic pass is O(all jobs) at 1M"
)

func oneMillion(t *testing.T, fill func(r *report.Report)) *report.Report {
	t.Helper()
	cfg := config{mode: "full", scale: []int{1000, 1000000}, parts: map[string]bool{"scale": true}}
	r := report.New()
	r.Cols = []string{"root"}
	fill(r)
	goals(cfg, r, []column{{key: "root"}})
	return r
}

func TestScaleProbeGoalsMetAtOneMillion(t *testing.T) {
	t.Parallel()
	r := oneMillion(t, func(r *report.Report) {
		scaleFigures(r, "1k", 20, true, 15, 40, 1.0, 0.5, 0.5, 0.5, 8.0)
		// managerd (N completed) at 6 ms/s is 12x 1k's but under the 10 ms/s floor;
		// watchdogd (N completed) at 14 ms/s is over the floor but within 2x.
		scaleFigures(r, "1M", 999, true, 35, 52000, 1.5, 1.0, 0.5, 6.0, 14.0)
	})
	wantMeasured(t, findGoal(t, r, "root", prioLabel), "0.999 s", true)
	wantMeasured(t, findGoal(t, r, "root", recoverLabel), "0.035 s (startup pass 52.0 s)", true)
	wantMeasured(t, findGoal(t, r, "root", idleLabel), "watchdogd (N completed) 14.00 ms/s at 1M, 8.00 at 1k", true)
}

func TestScaleProbeGoalsNotMetAtOneMillion(t *testing.T) {
	t.Parallel()
	r := oneMillion(t, func(r *report.Report) {
		scaleFigures(r, "1k", 20, true, 15, 40, 1.0, 0.5, 0.5, 0.5, 1.0)
		scaleFigures(r, "1M", 1001, true, 2100, 52000, 1.5, 30.0, 0.5, 40.0, 1.0)
	})
	wantMeasured(t, findGoal(t, r, "root", prioLabel), "1.001 s", false)
	wantMeasured(t, findGoal(t, r, "root", recoverLabel), "2.100 s (startup pass 52.0 s)", false)
	// The first daemon over the limit is named.
	wantMeasured(t, findGoal(t, r, "root", idleLabel), "managerd (N queued) 30.00 ms/s at 1M, 0.50 at 1k", false)
}

func TestScaleProbeGoalsPriorityNotFirst(t *testing.T) {
	t.Parallel()
	r := oneMillion(t, func(r *report.Report) {
		scaleFigures(r, "1k", 20, true, 15, 40, 1, 1, 1, 1, 1)
		scaleFigures(r, "1M", 40, false, 1500, 1400, 1, 1, 1, 1, 1)
	})
	wantMeasured(t, findGoal(t, r, "root", prioLabel), "0.040 s, not the first claim", false)
	// Recovered within 2 s but after the startup pass: not what the goal asks.
	wantUnmeasured(t, findGoal(t, r, "root", recoverLabel), "not probed during it")
	wantMeasured(t, findGoal(t, r, "root", idleLabel), "watchdogd (N queued) 1.00 ms/s at 1M, 1.00 at 1k", true)
}

func TestScaleProbeGoalsBelowOneMillion(t *testing.T) {
	t.Parallel()
	cfg := config{mode: "full", scale: []int{1000, 100000}, parts: map[string]bool{"scale": true}}
	r := report.New()
	r.Cols = []string{"root"}
	scaleFigures(r, "1k", 20, true, 15, 40, 1, 1, 1, 1, 1)
	scaleFigures(r, "100k", 30, true, 25, 5000, 1, 1, 1, 1, 25)
	goals(cfg, r, []column{{key: "root"}})
	wantMeasured(t, findGoal(t, r, "root", "scale: first claim, in priority order, within 1 s of agentd start at 100k"), "0.030 s", true)
	wantMeasured(t, findGoal(t, r, "root", "scale: watchdogd recovers a dead agent's job during its startup pass at 100k"), "0.025 s (startup pass 5.0 s)", true)
	wantMeasured(t, findGoal(t, r, "root", "scale: idle CPU per second of each daemon at 100k / at 1k"), "watchdogd (N completed) 25.00 ms/s at 100k, 1.00 at 1k", false)
	for _, label := range []string{prioLabel, recoverLabel, idleLabel} {
		wantUnmeasured(t, findGoal(t, r, "root", label), "1M not run (-scale up to 100k")
	}
}
