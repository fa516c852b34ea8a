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
	wantUnmeasured(t, findGoal(t, r, "root", "scale: watchdogd recovers a dead agent's job during its startup pass at 1M"), "small spool")
}
