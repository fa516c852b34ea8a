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
	{"scale: first claim, in priority order, within 1 s of agentd start at 1M", "<= 1 s, first claim"},
	{"scale: no periodic pass is O(all jobs) at 1M", idleTarget},
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
	if has1M {
		g.prioClaim(col, scaleGoalLabels[1].label, million)
		g.deadRecovery(col, scaleGoalLabels[3].label, million)
	} else {
		g.prioClaim(col, fmt.Sprintf("scale: first claim, in priority order, within 1 s of agentd start at %s", kfmt(hi)), hi)
		g.deadRecovery(col, fmt.Sprintf("scale: watchdogd recovers a dead agent's job during its startup pass at %s", kfmt(hi)), hi)
		g.unmeasured(col, scaleGoalLabels[1].label, scaleGoalLabels[1].target, not1M)
		g.unmeasured(col, scaleGoalLabels[3].label, scaleGoalLabels[3].target, not1M)
	}
	// Idle CPU: the goal is 1M against 1k; a smaller span is kept as a row.
	if len(cfg.scale) > 1 {
		label := fmt.Sprintf("scale: idle CPU per second of each daemon at %s / at %s", kfmt(hi), kfmt(lo))
		if has1M && lo == 1000 {
			label = scaleGoalLabels[2].label
		}
		g.idleCPU(col, label, hi, lo)
	}
	if !has1M || lo != 1000 || len(cfg.scale) < 2 {
		reason := not1M
		if has1M {
			reason = "needs 1000 as the smallest -scale size"
		}
		g.unmeasured(col, scaleGoalLabels[2].label, scaleGoalLabels[2].target, reason)
	}

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

// Limits of the scale goals the daemons are probed for.
const (
	prioClaimMaxMs = 1000 // agentd start -> claim of the priority job
	deadRecoverMs  = 2000 // watchdogd start -> the dead agent's job in stale/
	// A daemon's idle CPU per second at the large N may be at most
	// idleRatioMax times that at the small N, or at most idleFloor ms per
	// second (1% of a core) whatever the ratio: at 1k a daemon's idle CPU
	// is a few timer wake-ups, a ratio of two such figures is noise, while
	// a pass over all of 1M jobs (one listing of a directory of 1M names
	// is 0.5-1.3 s of CPU) made every minute or more often is over it.
	idleRatioMax = 2.0
	idleFloor    = 10.0
)

var idleTarget = fmt.Sprintf("each daemon <= %.0fx 1k's, or <= %.0f ms/s", idleRatioMax, idleFloor)

// idleFigures are the scale section's idle CPU figures (ms per second):
// each daemon on the spool with N queued and on the one with N completed.
var idleFigures = []struct{ key, name string }{
	{"sc-idle-wd", "watchdogd (N queued)"},
	{"sc-idle-md", "managerd (N queued)"},
	{"sc-done-idle-agent", "agentd (N completed)"},
	{"sc-done-idle-md", "managerd (N completed)"},
	{"sc-done-idle-wd", "watchdogd (N completed)"},
}

// prioClaim checks that agentd's first claim at depth n was the job
// submitted last with a priority, within prioClaimMaxMs of its start.
func (g goalChecker) prioClaim(col, label string, n int) {
	goal := report.Goal{Label: label, Col: col, Target: "<= 1 s, first claim"}
	x, ok1 := g.r.Num("sc-prio", kfmt(n))
	first, ok2 := g.r.Num("sc-prio-first", kfmt(n))
	switch {
	case !ok1 || !ok2:
		goal.Reason = "figure missing from this run"
	default:
		goal.Known, goal.Met = true, first == 1 && x <= prioClaimMaxMs
		goal.Value = fmt.Sprintf("%.3f s", x/1000)
		if first != 1 {
			goal.Value += ", not the first claim"
		}
	}
	g.r.AddGoal(goal)
}

// deadRecovery checks that watchdogd moved the dead agent's job to
// stale/ within deadRecoverMs of its start, during its startup pass.
func (g goalChecker) deadRecovery(col, label string, n int) {
	goal := report.Goal{Label: label, Col: col, Target: "<= 2 s"}
	x, ok1 := g.r.Num("sc-wd-recover", kfmt(n))
	pass, ok2 := g.r.Num("sc-wd-pass", kfmt(n))
	switch {
	case !ok1 || !ok2:
		goal.Reason = "figure missing from this run"
	case x > deadRecoverMs:
		goal.Known, goal.Value = true, fmt.Sprintf("%.3f s (startup pass %.1f s)", x/1000, pass/1000)
	case x >= pass:
		goal.Reason = fmt.Sprintf("the startup pass ended (%.3f s) before the recovery (%.3f s): not probed during it", pass/1000, x/1000)
	default:
		goal.Known, goal.Met = true, true
		goal.Value = fmt.Sprintf("%.3f s (startup pass %.1f s)", x/1000, pass/1000)
	}
	g.r.AddGoal(goal)
}

// idleCPU checks every daemon's idle CPU per second at depth hi against
// the same at lo (idleRatioMax, or under idleFloor). The value shown is
// the first daemon over the limit, else the busiest at hi.
func (g goalChecker) idleCPU(col, label string, hi, lo int) {
	goal := report.Goal{Label: label, Col: col, Target: idleTarget}
	worst, worstX, met := "", -1.0, true
	for _, f := range idleFigures {
		x, ok1 := g.r.Num(f.key, kfmt(hi))
		y, ok2 := g.r.Num(f.key, kfmt(lo))
		if !ok1 || !ok2 {
			goal.Reason = "figure missing from this run"
			g.r.AddGoal(goal)
			return
		}
		v := fmt.Sprintf("%s %.2f ms/s at %s, %.2f at %s", f.name, x, kfmt(hi), y, kfmt(lo))
		if x > idleRatioMax*y && x > idleFloor {
			if met {
				worst = v
			}
			met = false
			continue
		}
		if met && x > worstX {
			worst, worstX = v, x
		}
	}
	goal.Known, goal.Met, goal.Value = true, met, worst
	g.r.AddGoal(goal)
}
