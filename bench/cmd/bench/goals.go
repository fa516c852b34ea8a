package main

import (
	"fmt"

	"github.com/farro-dev/farro/bench/internal/report"
)

// goalChecker adds the goals to the report, one row per goal and
// filesystem: MET / NOT MET from this run's figures, or NOT MEASURED with
// the reason when the figure is not in this run (or not in this benchmark).
type goalChecker struct {
	cfg config
	r   *report.Report
}

// why a figure of part (measured with the peers if peers) is missing.
func (g goalChecker) why(part string, peers bool) string {
	switch {
	case !g.cfg.want(part):
		return "not in -only"
	case peers && !g.cfg.peers:
		return "peers not run: -peers no, or smoke mode"
	}
	return "figure missing from this run"
}

func (g goalChecker) unmeasured(col, label, target, reason string) {
	g.r.AddGoal(report.Goal{Label: label, Col: col, Target: target, Reason: reason})
}

// ratio checks num(a)/num(b) against target: at least (atLeast) or at most.
func (g goalChecker) ratio(col, label, a, b string, target float64, atLeast bool, part string, peers bool) {
	cmp := "<="
	if atLeast {
		cmp = ">="
	}
	goal := report.Goal{Label: label, Col: col, Target: fmt.Sprintf("%s %.1fx", cmp, target)}
	x, ok1 := g.r.Num(a, col)
	y, ok2 := g.r.Num(b, col)
	if !ok1 || !ok2 || y <= 0 {
		goal.Reason = g.why(part, peers)
		g.r.AddGoal(goal)
		return
	}
	q := x / y
	goal.Known, goal.Value = true, fmt.Sprintf("%.2fx", q)
	if atLeast {
		goal.Met = q >= target
	} else {
		goal.Met = q <= target
	}
	g.r.AddGoal(goal)
}

// atMost checks num(key) <= limit, shown with unit.
func (g goalChecker) atMost(col, label, key string, limit float64, unit, format, part string) {
	goal := report.Goal{Label: label, Col: col, Target: fmt.Sprintf("<= %g %s", limit, unit)}
	if x, ok := g.r.Num(key, col); ok {
		goal.Known, goal.Value, goal.Met = true, fmt.Sprintf(format+" %s", x, unit), x <= limit
	} else {
		goal.Reason = g.why(part, false)
	}
	g.r.AddGoal(goal)
}

const million = 1000000

func goals(cfg config, r *report.Report, cols []column) {
	g := goalChecker{cfg: cfg, r: r}
	for _, c := range cols {
		col := c.key
		// Durable throughput.
		g.ratio(col, "durable throughput farro / River tuned (PostgreSQL)", "farro1x4", "river-tuned", 1.0, true, "throughput", true)
		g.ratio(col, "durable throughput farro / River SQLite tuned", "farro1x4", "riversqlite-tuned", 1.0, true, "throughput", true)
		g.ratio(col, "durable throughput farro / asynq default (AOF always)", "farro1x4", "asynq-default", 1.0, true, "throughput", true)
		g.ratio(col, "durable throughput farro / asynq tuned (AOF always)", "farro1x4", "asynq-tuned", 1.0, true, "throughput", true)
		g.ratio(col, "durable throughput farro / group-commit floor", "farro1x4", "floor-group16", 0.8, true, "throughput", false)
		g.unmeasured(col, "throughput with every guarantee of docs/RELIABILITY.md", "intact", "not a benchmark figure: test/crash")
		// Pickup on an idle queue.
		g.atMost(col, "pickup p50 farro (to exec handler start)", "pick-farro.p50", 5, "ms", "%.2f", "pickup")
		g.ratio(col, "pickup p99 farro / River default p99", "pick-farro", "pick-river-default", 1.0, false, "pickup", true)
		g.ratio(col, "pickup p99 farro / River tuned (PostgreSQL) p99", "pick-farro", "pick-river-tuned", 1.0, false, "pickup", true)
		g.ratio(col, "pickup p99 farro / River SQLite tuned p99", "pick-farro", "pick-riversqlite-tuned", 1.0, false, "pickup", true)
		// Insert.
		g.ratio(col, "insert: farroctl --version wall per run / minimal Go binary's", "ins-start-ms", "ins-hello-ms", 1.5, false, "insert", false)
		g.ratio(col, "insert: farroctl submit --batch / River InsertMany (PostgreSQL)", "ins-batch", "ins-riverm", 0.5, true, "insert", true)
		g.ratio(col, "insert: Spool.SubmitMany / River InsertMany (PostgreSQL)", "ins-many", "ins-riverm", 0.5, true, "insert", true)
		g.ratio(col, "insert: farroctl submit --batch / River SQLite InsertMany", "ins-batch", "ins-riversqlite-m", 0.5, true, "insert", true)
		g.ratio(col, "insert: Spool.SubmitMany / River SQLite InsertMany", "ins-many", "ins-riversqlite-m", 0.5, true, "insert", true)
		pgGoals(g, col, cols[0].key)
		// Recovery (kept from earlier goals: the daemons' defaults).
		if _, ok := r.Num("rec-farro", col); ok || cfg.want("recovery") {
			g.atMost(col, "recovery p99 farro", "rec-farro", 2, "s", "%.2f", "recovery")
		}
		// Scale: measured on the first column only.
		if col == cols[0].key {
			scaleGoals(g, col)
		} else {
			for _, s := range scaleGoalLabels {
				g.unmeasured(col, s.label, s.target, "scale runs on the "+cols[0].key+" column only")
			}
		}
	}
}

// scaleGoalLabels are the 1M goals, for columns the scale figures do not
// run on.
var scaleGoalLabels = []struct{ label, target string }{
	{"scale: each daemon's peak RSS at 1M queued", "<= 64 MiB"},
	{"scale: first claim, in priority order, within 1 s of agentd start at 1M", "<= 1 s"},
	{"scale: no periodic pass is O(all jobs) at 1M", "O(work due)"},
	{"scale: watchdogd recovers a dead agent's job during its startup pass at 1M", "<= 2 s"},
	{"scale: Spool.Claim p50 at 1M / at 1k", "<= 1.5x"},
}

func scaleGoals(g goalChecker, col string) {
	cfg, r := g.cfg, g.r
	if !cfg.want("scale") || len(cfg.scale) == 0 {
		for _, s := range scaleGoalLabels {
			g.unmeasured(col, s.label, s.target, g.why("scale", false))
		}
		return
	}
	lo, hi := cfg.scale[0], cfg.scale[len(cfg.scale)-1]
	has1M := false
	for _, n := range cfg.scale {
		has1M = has1M || n == million
	}
	not1M := fmt.Sprintf("1M not run (-scale up to %s; add 1000000)", kfmt(hi))

	// RSS: the largest daemon at the largest N (what exists); at 1M the goal itself.
	rss := func(n int, label string) {
		x, ok1 := r.Num("sc-rss", kfmt(n))
		y, ok2 := r.Num("sc-done-rss", kfmt(n))
		goal := report.Goal{Label: label, Col: col, Target: "<= 64 MiB", Known: ok1 || ok2}
		if goal.Known {
			m := max(x, y)
			goal.Value, goal.Met = fmt.Sprintf("%.1f MiB", m), m <= 64
		} else {
			goal.Reason = "figure missing from this run"
		}
		r.AddGoal(goal)
	}
	if has1M {
		rss(million, scaleGoalLabels[0].label)
	} else {
		rss(hi, fmt.Sprintf("scale: largest daemon RSS at %s", kfmt(hi)))
		g.unmeasured(col, scaleGoalLabels[0].label, scaleGoalLabels[0].target, not1M)
	}
	g.unmeasured(col, scaleGoalLabels[1].label, scaleGoalLabels[1].target,
		"the fixture's jobs share one priority; section 6 has agentd start -> first job succeeded")
	g.unmeasured(col, scaleGoalLabels[2].label, scaleGoalLabels[2].target,
		"section 6 times the passes over completed/ only, not managerd's rescan of deferred jobs")
	g.unmeasured(col, scaleGoalLabels[3].label, scaleGoalLabels[3].target,
		"recovery (section 5) is probed on a small spool, not during a startup pass")

	// Claim cost: the goal is 1M against 1k; a smaller span is kept as a row.
	if len(cfg.scale) > 1 {
		label := fmt.Sprintf("scale: Spool.Claim p50 at %s / at %s", kfmt(hi), kfmt(lo))
		if has1M && lo == 1000 {
			label = scaleGoalLabels[4].label
		}
		g.depthRatio(col, label, "sc-claim", hi, lo)
		g.depthRatio(col, fmt.Sprintf("scale: agentd wall ms per job at %s / at %s", kfmt(hi), kfmt(lo)), "sc-agent-ms", hi, lo)
	}
	if !has1M || lo != 1000 || len(cfg.scale) < 2 {
		reason := not1M
		if has1M {
			reason = "needs 1000 as the smallest -scale size"
		}
		g.unmeasured(col, scaleGoalLabels[4].label, scaleGoalLabels[4].target, reason)
	}
}

// depthRatio checks a scale figure at depth hi over the same at depth lo
// (the scale section's columns) against <= 1.5x.
func (g goalChecker) depthRatio(col, label, key string, hi, lo int) {
	goal := report.Goal{Label: label, Col: col, Target: "<= 1.5x"}
	x, ok1 := g.r.Num(key, kfmt(hi))
	y, ok2 := g.r.Num(key, kfmt(lo))
	if !ok1 || !ok2 || y <= 0 {
		goal.Reason = "figure missing from this run"
	} else {
		goal.Known, goal.Value, goal.Met = true, fmt.Sprintf("%.2fx", x/y), x/y <= 1.5
	}
	g.r.AddGoal(goal)
}
