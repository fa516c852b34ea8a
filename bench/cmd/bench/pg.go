package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/farro-dev/farro/bench/internal/farrob"
	"github.com/farro-dev/farro/bench/internal/peers"
	"github.com/farro-dev/farro/bench/internal/report"
	"github.com/farro-dev/farro/bench/internal/stats"
	"github.com/farro-dev/farro/bench/internal/sys"
)

// farro on PostgreSQL: the daemons with --store on the benchmark's private
// PostgreSQL (the instance River's figures use, same settings), beside
// River in sections 1 and 4, and the claim's cost by queue depth in a
// section of its own.

// pgConfig is what the farro-on-PostgreSQL figures take from the flags.
type pgConfig struct {
	on     bool   // -pg yes
	skip   string // why they are not measured in this run ("": they are)
	runs4  int    // runs of 4 agentd x4
	depths []int  // queue depths of the claim cost
	claims int    // claims timed at each depth
}

// parsePGFlags reads -pg and -pg-depths (after flag.Parse).
func parsePGFlags(full bool, on, depths string, yes func(string, bool) bool) *pgConfig {
	c := &pgConfig{on: yes(on, true), runs4: 1, claims: 200}
	if full {
		c.claims = 2000
	}
	if depths == "" {
		depths = "1000,10000"
		if full {
			depths = "1000,1000000"
		}
	}
	for _, f := range strings.Split(depths, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 100 {
			fatalf("-pg-depths: bad depth %q (at least 100)", f)
		}
		c.depths = append(c.depths, v)
	}
	if !c.on {
		c.skip = "-pg no"
	}
	return c
}

// pgWanted is whether this run measures any farro-on-PostgreSQL figure.
func (c config) pgWanted() bool {
	return c.pg != nil && c.pg.on && c.pg.skip == "" && (c.want("throughput") || c.want("pickup") || c.want("pgclaim"))
}

// secPGClaim is the claim-cost section's title.
const secPGClaim = "9. farro on PostgreSQL: store.Claim (1 job) + Commit(succeeded) in process, 1 goroutine, by queued rows (ms per job)"

// pgOf is the farrob view of the benchmark's PostgreSQL.
func pgOf(pg *peers.Postgres) farrob.PG {
	pid := pg.PID()
	return farrob.PG{Admin: pg.DSN, CPU: func() (time.Duration, error) { return sys.TreeCPU(pid) }}
}

// cpuOf reads cpu, if there is one.
func cpuOf(cpu func() (time.Duration, error)) (time.Duration, error) {
	if cpu == nil {
		return 0, nil
	}
	return cpu()
}

// measurePGThroughput is section 1's farro-on-PostgreSQL rows: cfg.runs
// burn-downs with 1 agentd x4, cfg.pg.runs4 with 4 agentd x4, the ratio
// of the two, and PostgreSQL's CPU per job.
func measurePGThroughput(cfg config, r *report.Report, bins farrob.Bins, c column, colLogs string, pg farrob.PG, burnTimeout time.Duration) error {
	col := c.key
	tp := r.Section(secThroughput)
	var one, four, dbCPU []float64
	for run := 1; run <= cfg.runs; run++ {
		res, err := bins.PGBurnDown(farrob.PGBurnConfig{PG: pg, Base: c.dir, LogDir: colLogs, Jobs: cfg.n, Agents: 1, Concurrency: 4, Timeout: burnTimeout})
		if err != nil {
			return err
		}
		one = append(one, res.Rate())
		dbCPU = append(dbCPU, stats.Ms(res.DBCPU)/float64(res.Jobs))
		logf("%s run %d: farro on PostgreSQL 1 agentd x4: %.0f jobs/s (PostgreSQL CPU %.2f ms/job)", col, run, res.Rate(), stats.Ms(res.DBCPU)/float64(res.Jobs))
	}
	for run := 1; run <= cfg.pg.runs4; run++ {
		res, err := bins.PGBurnDown(farrob.PGBurnConfig{PG: pg, Base: c.dir, LogDir: colLogs, Jobs: cfg.n, Agents: 4, Concurrency: 4, Timeout: burnTimeout})
		if err != nil {
			return err
		}
		four = append(four, res.Rate())
		logf("%s run %d: farro on PostgreSQL 4 agentd x4: %.0f jobs/s", col, run, res.Rate())
	}
	txt, med1 := rateCell(one)
	tp.Set("pg1x4", fmt.Sprintf("farro on PostgreSQL: 1 agentd x4 (+managerd, watchdogd), N=%d", cfg.n), col, txt, med1)
	txt, med4 := rateCell(four)
	tp.Set("pg4x4", fmt.Sprintf("farro on PostgreSQL: 4 agentd x4 (+managerd, watchdogd), N=%d, %d run", cfg.n, cfg.pg.runs4), col, txt, med4)
	if med1 > 0 && med4 > 0 {
		tp.Set("pg4x4-ratio", "  farro on PostgreSQL: 4 agentd x4 / 1 agentd x4", col, fmt.Sprintf("%.2fx", med4/med1), med4/med1)
	}
	m := stats.Median(dbCPU)
	tp.Set("pg-dbcpu", "  farro on PostgreSQL 1 agentd x4: PostgreSQL CPU per job, its Submit calls included (ms, median)", col, fmt.Sprintf("%.2f", m), m)
	return nil
}

// measurePGPickup is section 4's farro-on-PostgreSQL row.
func measurePGPickup(cfg config, r *report.Report, bins farrob.Bins, c column, colLogs string, pg farrob.PG) error {
	col := c.key
	pr, err := bins.PGPickup(pg, c.dir, colLogs, cfg.probes)
	if err != nil {
		return err
	}
	pk := r.Section(secPickup)
	pk.Set("pick-pg", fmt.Sprintf("farro on PostgreSQL: Submit -> exec handler (sh) running, %d probes", cfg.probes), col, latCell(pr.Start), stats.Ms(pr.Start.P99))
	r.SetNum("pick-pg.p50", col, stats.Ms(pr.Start.P50))
	pk.Set("pick-pg-run", "  farro on PostgreSQL: Submit -> agentd starts the job (its in-progress log line, before the handler's exec)", col, latCell(pr.Claim), stats.Ms(pr.Claim.P99))
	r.SetNum("pick-pg-run.p50", col, stats.Ms(pr.Claim.P50))
	pk.Set("pick-pg-submit", "  farro on PostgreSQL: Submit alone (one transaction, durable)", col, latCell(pr.Submit), stats.Ms(pr.Submit.P99))
	logf("%s: pickup farro on PostgreSQL: %s ms", col, latCell(pr.Start))
	return nil
}

// measurePGClaim is the claim-cost section: at each depth a fresh
// database filled with COPY, then cfg.pg.claims claims and commits.
func measurePGClaim(cfg config, r *report.Report, pg farrob.PG) error {
	sec := r.Section(secPGClaim)
	for _, d := range cfg.pg.depths {
		col := kfmt(d)
		sec.Cols = append(sec.Cols, col)
		logf("postgres claim cost: filling %s queued rows", col)
		res, err := farrob.PGClaimCost(pg, d, min(cfg.pg.claims, d/2))
		if err != nil {
			return fmt.Errorf("claim cost at %s: %w", col, err)
		}
		sec.Set("pg-fill", "fixture: COPY of N queued jobs and their events, then ANALYZE (s; not a farro figure)", col, fmt.Sprintf("%.1f", res.Fill.Seconds()), res.Fill.Seconds())
		sec.Set("pg-claim", fmt.Sprintf("Claim + Commit, p50 / p99 over %d jobs", res.Each.N), col, latCell(res.Each), stats.Ms(res.Each.P50))
		sec.Set("pg-claim-mean", "Claim + Commit, mean", col, fmtMs(res.Mean), stats.Ms(res.Mean))
		logf("postgres claim cost at %s: %s ms (mean %s)", col, latCell(res.Each), res.Mean)
	}
	return nil
}

// pgGoals adds the farro-on-PostgreSQL goals for column col (first: the
// column the claim cost runs on).
func pgGoals(g goalChecker, col string, first string) {
	cfg, r := g.cfg, g.r
	if cfg.pg == nil {
		cfg.pg = &pgConfig{skip: "-pg no"}
	}
	missing := func(label, target, key string) bool {
		if cfg.pg.skip == "" {
			return false
		}
		if _, ok := r.Num(key, col); ok {
			return false
		}
		g.unmeasured(col, label, target, "farro on PostgreSQL not run: "+cfg.pg.skip)
		return true
	}
	const tpLabel = "durable throughput farro on PostgreSQL / River tuned (PostgreSQL)"
	if !missing(tpLabel, ">= 1.0x", "pg1x4") {
		g.ratio(col, tpLabel, "pg1x4", "river-tuned", 1.0, true, "throughput", true)
	}
	const pkLabel = "pickup p50 farro on PostgreSQL / River tuned p50"
	if !missing(pkLabel, "<= 1.0x", "pick-pg.p50") {
		g.ratio(col, pkLabel, "pick-pg.p50", "pick-river-tuned.p50", 1.0, false, "pickup", true)
	}

	const claimLabel = "claim cost at 1M / at 1k (farro on PostgreSQL, Claim+Commit p50)"
	if col != first {
		g.unmeasured(col, claimLabel, "<= 1.5x", "the claim cost runs on the "+first+" column only")
		return
	}
	if cfg.pg.skip != "" {
		g.unmeasured(col, claimLabel, "<= 1.5x", "farro on PostgreSQL not run: "+cfg.pg.skip)
		return
	}
	if !cfg.want("pgclaim") {
		g.unmeasured(col, claimLabel, "<= 1.5x", "not in -only")
		return
	}
	ds := cfg.pg.depths
	lo, hi := ds[0], ds[len(ds)-1]
	if len(ds) > 1 && !(lo == 1000 && hi == million) {
		g.pgDepthRatio(col, fmt.Sprintf("claim cost at %s / at %s (farro on PostgreSQL, Claim+Commit p50)", kfmt(hi), kfmt(lo)), hi, lo)
	}
	switch {
	case lo == 1000 && hi == million:
		g.pgDepthRatio(col, claimLabel, hi, lo)
	case hi != million:
		g.unmeasured(col, claimLabel, "<= 1.5x", fmt.Sprintf("1M not run (-pg-depths up to %s; full mode runs 1000,1000000)", kfmt(hi)))
	default:
		g.unmeasured(col, claimLabel, "<= 1.5x", "needs 1000 as the smallest -pg-depths depth")
	}
}

// pgDepthRatio checks the claim cost at depth hi over that at lo.
func (g goalChecker) pgDepthRatio(col, label string, hi, lo int) {
	goal := report.Goal{Label: label, Col: col, Target: "<= 1.5x"}
	x, ok1 := g.r.Num("pg-claim", kfmt(hi))
	y, ok2 := g.r.Num("pg-claim", kfmt(lo))
	if !ok1 || !ok2 || y <= 0 {
		goal.Reason = "figure missing from this run"
	} else {
		goal.Known, goal.Value, goal.Met = true, fmt.Sprintf("%.2fx", x/y), x/y <= 1.5
	}
	g.r.AddGoal(goal)
}

// pgNotes explains the farro-on-PostgreSQL figures under the table.
func pgNotes(cfg config, r *report.Report) {
	if cfg.pg == nil || !cfg.pg.on {
		return
	}
	r.Note("farro on PostgreSQL: agentd, managerd and watchdogd with --store on a fresh database of the benchmark's PostgreSQL (the instance River uses, fsync=on, synchronous_commit=on), migrated by farroctl migrate; --spool is each run's local directory. Burn-down: N noop jobs queued through pgstore's Submit in batches of %d (one transaction each, as River's InsertMany), managerd and watchdogd ready (READY=1 on NOTIFY_SOCKET) before the clock, which runs from the exec of the agents until SELECT count(*) ... status='succeeded' reaches N (polled every 10 ms). PostgreSQL's CPU is utime+stime of the postmaster and its backends from /proc, read before the first Submit and after the last job (River's: before its InsertMany and after its last job), divided by N.", farrob.PGSubmitBatch)
	r.Note("farro on PostgreSQL pickup: Submit of one exec job (one transaction) -> agentd's exec handler writing the job id into a FIFO, as the spool row; agentd wakes on LISTEN/NOTIFY (a notification wakes one idle slot). The 'agentd starts the job' row is the same probe read earlier: agentd logs into a FIFO the benchmark reads, and the job's queued -> in-progress line is stamped as it is written, when the slot starts the job, after the claim's commit and before the exec of the handler: the point River's in-process Work is at. Claim cost (section 9, root column): a fresh database filled by COPY with N queued jobs and their events (then ANALYZE), then %d jobs claimed one at a time (store.Claim, max 1) and committed succeeded, in process, after 10 untimed ones.", cfg.pg.claims)
}
