// Command bench measures farro against River (PostgreSQL, and SQLite in an
// embedded file) and asynq (Redis), and against the filesystem floor of its
// own design, on this machine, in one run, and prints a table with the
// speed goals per filesystem.
//
//	go run ./cmd/bench              # full run: installs and starts PostgreSQL and Redis
//	go run ./cmd/bench -mode smoke  # farro and the floor only, small N, < 1 minute
//
// Everything runs under a temporary directory (removed at the end unless
// -keep); the journaled ext4 is a loop-mounted image inside it. PostgreSQL
// and Redis are private instances on loopback, stopped by PID at the end.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/farro-dev/farro/bench/internal/cli"
	"github.com/farro-dev/farro/bench/internal/farrob"
	"github.com/farro-dev/farro/bench/internal/floor"
	"github.com/farro-dev/farro/bench/internal/peers"
	"github.com/farro-dev/farro/bench/internal/report"
	"github.com/farro-dev/farro/bench/internal/stats"
	"github.com/farro-dev/farro/bench/internal/sys"
)

type config struct {
	mode       string
	n, runs    int
	extraRuns  int // runs of the exec figure
	fourRuns   int // runs of the 4-agent layout
	journal    bool
	peers      bool
	scale      []int
	farroRoot  string
	workParent string
	out        string
	keep       bool
	probes     int
	kills      int
	insertN    int
	cliN       int
	startN     int // runs each of farroctl --version and the minimal Go binary
	execN      int
	riverDefN  int
	floorMax   time.Duration
	claims     int
	scaleBurn  int
	scaleIdle  time.Duration // the scale section's idle CPU window
	journalGiB int
	parts      map[string]bool // empty: all
	pgOnly     bool            // -pg-only: of the systems, farro on PostgreSQL and River tuned only
	pg         *pgConfig       // farro on PostgreSQL (pg.go); shared by the columns
}

// allParts are the figures -only may choose from.
var allParts = []string{"throughput", "exec", "insert", "pickup", "recovery", "steps", "scale", "pgclaim"}

func (c config) want(part string) bool { return len(c.parts) == 0 || c.parts[part] }

// measures says whether the throughput and pickup figures measure a
// system: "spool" (farro on a spool and the floor), "river-default",
// "river-tuned" or "others" (River SQLite, asynq). -pg-only keeps River
// tuned only, beside farro on PostgreSQL.
func (c config) measures(system string) bool { return !c.pgOnly || system == "river-tuned" }

func parseFlags() config {
	c := config{}
	mode := flag.String("mode", "full", "full (with River and asynq, both filesystems) or smoke (farro and floor only, small N, root fs)")
	n := flag.Int("n", 0, "jobs per burn-down (default: 5000 full, 200 smoke)")
	runs := flag.Int("runs", 0, "runs per throughput figure; the median is reported (default: 3 full, 1 smoke)")
	journal := flag.String("journal", "", "also measure on a loop-mounted journaled ext4: yes|no (default: yes full, no smoke)")
	withPeers := flag.String("peers", "", "measure River and asynq: yes|no (default: yes full, no smoke)")
	scale := flag.String("scale", "", "queue sizes of the scale figures, comma-separated (default: 1000,10000,100000 full; 500 smoke)")
	scaleIdle := flag.Duration("scale-idle", 0, "window of the scale figures' idle CPU per daemon (default: 20s full, 3s smoke)")
	flag.StringVar(&c.farroRoot, "farro", "..", "farro's checkout (its binaries are built from it)")
	flag.StringVar(&c.workParent, "work", "", "parent of the temporary work directory (default: $TMPDIR or /tmp); its filesystem is the 'root' column")
	flag.StringVar(&c.out, "out", "", "also write the table to this file")
	flag.BoolVar(&c.keep, "keep", false, "keep the work directory (spools, logs) at the end")
	probes := flag.Int("probes", 0, "pickup probes per system (default: 50 full, 10 smoke)")
	kills := flag.Int("kills", 0, "agent SIGKILLs for the recovery figure (default: 20 full, 2 smoke)")
	withPG := flag.String("pg", "", "measure farro on PostgreSQL (the daemons with --store on the benchmark's PostgreSQL): yes|no (default: yes)")
	pgDepths := flag.String("pg-depths", "", "queued rows of the PostgreSQL claim-cost figure, comma-separated (default: 1000,1000000 full; 1000,10000 smoke)")
	only := flag.String("only", "", "measure only these figures, comma-separated: "+strings.Join(allParts, ","))
	flag.BoolVar(&c.pgOnly, "pg-only", false, "in the throughput and pickup figures, measure farro on PostgreSQL and River tuned beside it only (not the spool, the floor, River default, River SQLite, asynq)")
	flag.Parse()
	if *only != "" {
		c.parts = map[string]bool{}
		for _, p := range strings.Split(*only, ",") {
			p = strings.TrimSpace(p)
			ok := false
			for _, a := range allParts {
				ok = ok || a == p
			}
			if !ok {
				fatalf("-only: unknown figure %q (known: %s)", p, strings.Join(allParts, ", "))
			}
			c.parts[p] = true
		}
	}

	c.mode = *mode
	full := c.mode == "full"
	if !full && c.mode != "smoke" {
		fatalf("-mode must be full or smoke")
	}
	pick := func(v, fullV, smokeV int) int {
		if v > 0 {
			return v
		}
		if full {
			return fullV
		}
		return smokeV
	}
	yes := func(v string, def bool) bool {
		switch v {
		case "":
			return def
		case "yes", "true", "1":
			return true
		case "no", "false", "0":
			return false
		}
		fatalf("expected yes or no, got %q", v)
		return false
	}
	c.n = pick(*n, 5000, 200)
	c.runs = pick(*runs, 3, 1)
	c.extraRuns = pick(0, 3, 1)
	c.fourRuns = pick(0, 1, 0)
	if !full {
		c.fourRuns = 0
	}
	c.journal = yes(*journal, full)
	c.peers = yes(*withPeers, full)
	c.probes = pick(*probes, 50, 10)
	c.kills = pick(*kills, 20, 2)
	c.insertN = pick(0, 1000, 50)
	c.cliN = pick(0, 200, 10)
	c.startN = pick(0, 500, 200)
	c.execN = pick(0, 1000, 50)
	c.riverDefN = max(200, c.n/10)
	c.floorMax = 5 * time.Second
	if !full {
		c.floorMax = 2 * time.Second
	}
	c.claims = pick(0, 200, 30)
	c.pg = parsePGFlags(full, *withPG, *pgDepths, yes)
	c.scaleBurn = pick(0, 1000, 100)
	c.scaleIdle = *scaleIdle
	if c.scaleIdle <= 0 {
		c.scaleIdle = 20 * time.Second
		if !full {
			c.scaleIdle = 3 * time.Second
		}
	}
	c.journalGiB = 4
	sizes := *scale
	if sizes == "" {
		sizes = "1000,10000,100000"
		if !full {
			sizes = "500"
		}
	}
	for _, f := range strings.Split(sizes, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 100 {
			fatalf("-scale: bad size %q (at least 100)", f)
		}
		c.scale = append(c.scale, v)
	}
	return c
}

var (
	fatalf = cli.Fatalf
	logf   = cli.Logf
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == farrob.ClaimChildArg {
		// The scale section's dead agent (farrob.DeadHolder).
		if err := farrob.ClaimChild(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "bench: claim child:", err)
			os.Exit(1)
		}
		return
	}
	cli.SetName("bench")
	cfg := parseFlags()
	cli.Main(func() error { return run(cfg) })
}

// column is one filesystem the figures are measured on.
type column struct {
	key string // "root" or "journal"
	dir string
	fs  sys.FS
}

func run(cfg config) error {
	r := report.New()
	machine := sys.ReadMachine()
	loadStart := sys.LoadAvg()
	farroRoot, err := filepath.Abs(cfg.farroRoot)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(farroRoot, "cmd", "agentd")); err != nil {
		return fmt.Errorf("-farro %s is not farro's checkout (no cmd/agentd)", farroRoot)
	}
	work, err := os.MkdirTemp(cfg.workParent, "farro-bench-")
	if err != nil {
		return err
	}
	if err := os.Chmod(work, 0o755); err != nil { // PostgreSQL runs as another user
		return err
	}
	cli.AddCleanup(func() {
		if cfg.keep {
			logf("kept %s", work)
			return
		}
		_ = sys.RemoveTree(work)
	})
	logDir := filepath.Join(work, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	logf("mode %s, work dir %s", cfg.mode, work)

	logf("building farro from %s", farroRoot)
	bins, err := farrob.Build(farroRoot, filepath.Join(work, "bin"))
	if err != nil {
		return err
	}
	if cfg.peers {
		if err := sys.EnsurePackages(logf); err != nil {
			return err
		}
	}
	if cfg.pg.on && sys.PGBin() == "" {
		// Smoke mode (and -peers no) installs nothing.
		cfg.pg.skip = "postgresql is not installed (only a full run with peers installs it)"
		r.Note("farro on PostgreSQL not measured: %s", cfg.pg.skip)
	}

	cols := []column{{key: "root", dir: filepath.Join(work, "root")}}
	if cfg.journal {
		mnt := filepath.Join(work, "journal")
		l, err := sys.MountLoopExt4(filepath.Join(work, "journal.img"), mnt, cfg.journalGiB)
		if err != nil {
			r.Note("journaled ext4 not measured: %v", err)
			logf("no journaled ext4: %v", err)
		} else {
			cli.AddCleanup(func() {
				if err := l.Unmount(); err != nil {
					logf("unmount %s: %v", mnt, err)
				}
			})
			if err := os.Chmod(mnt, 0o755); err != nil {
				return err
			}
			cols = append(cols, column{key: "journal", dir: filepath.Join(mnt, "w")})
		}
	}
	for i := range cols {
		if err := os.MkdirAll(cols[i].dir, 0o755); err != nil {
			return err
		}
		cols[i].fs = sys.ReadFS(cols[i].dir)
		r.Cols = append(r.Cols, cols[i].key)
	}

	r.Header = append(r.Header,
		fmt.Sprintf("farro benchmark, mode %s, %s", cfg.mode, time.Now().UTC().Format("2006-01-02 15:04 UTC")),
		"machine: "+machine.String(),
		"farro:   "+describeCheckout(farroRoot))
	for _, c := range cols {
		extra := ""
		if c.key == "journal" {
			extra = fmt.Sprintf(", a %d GiB loop-mounted image", cfg.journalGiB)
		}
		r.Header = append(r.Header, fmt.Sprintf("%-8s %s%s", c.key+":", c.fs, extra))
	}

	// Sections in report order (rows are added as figures come in).
	for _, t := range []string{secThroughput, secExec, secInsert, secPickup, secRecovery, scaleTitle(cols[0]), secExperiment, secSteps, secPGClaim} {
		r.Section(t)
	}
	for _, c := range cols {
		if err := measureColumn(cfg, r, bins, c, logDir); err != nil {
			return fmt.Errorf("%s: %w", c.key, err)
		}
	}
	if cfg.want("scale") {
		if err := measureScale(cfg, r, bins, cols[0], logDir); err != nil {
			return fmt.Errorf("scale: %w", err)
		}
	}
	goals(cfg, r, cols)
	notes(cfg, r)
	r.Header = append(r.Header, fmt.Sprintf("load:    1-minute load average %s at start, %s at the end (anything else running skews the figures)", loadStart, sys.LoadAvg()))

	logf("done in %s", cli.Elapsed().Round(time.Second))
	var w io.Writer = os.Stdout
	if cfg.out != "" {
		f, err := os.Create(cfg.out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	fmt.Fprintln(os.Stdout)
	r.Render(w)
	return nil
}

func describeCheckout(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return root
	}
	return root + " @ " + strings.TrimSpace(string(out))
}

// Section titles.
const (
	secThroughput = "1. Durable work throughput: burn-down of N no-op jobs queued beforehand, 4 workers (jobs/s; median [min..max] of the runs)"
	secExec       = "2. farro exec handler running /bin/true (jobs/s; median [min..max])"
	secInsert     = "3. Insert throughput (jobs/s)"
	secPickup     = "4. Pickup latency on an idle queue, from the start of the insert to the handler's start (ms, p50 / p99)"
	secRecovery   = "5. Recovery: SIGKILL the agent holding a job; time until the job is claimed again (default settings)"
	secExperiment = "7. Protocol experiments as raw syscalls, 4 goroutines, same N (jobs/s; median [min..max]); not farro figures"
	secSteps      = "8. farro's claim + commit step by step: pkg/job in process, 1 goroutine, no daemons (ms per job, mean)"
)

func rateCell(rates []float64) (string, float64) {
	if len(rates) == 0 {
		return "", 0
	}
	med := stats.Median(rates)
	if len(rates) == 1 {
		return fmt.Sprintf("%.0f", med), med
	}
	lo, hi := rates[0], rates[0]
	for _, x := range rates {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%.0f [%.0f..%.0f]", med, lo, hi), med
}

func latCell(l stats.Latency) string {
	return fmt.Sprintf("%s / %s", fmtMs(l.P50), fmtMs(l.P99))
}

func fmtMs(d time.Duration) string {
	ms := stats.Ms(d)
	switch {
	case ms >= 1000:
		return fmt.Sprintf("%.0f", ms)
	case ms >= 100:
		return fmt.Sprintf("%.0f", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f", ms)
	default:
		return fmt.Sprintf("%.2f", ms)
	}
}

func measureColumn(cfg config, r *report.Report, bins farrob.Bins, c column, logDir string) error {
	ctx := context.Background()
	col := c.key
	colLogs := filepath.Join(logDir, col)
	if err := os.MkdirAll(colLogs, 0o755); err != nil {
		return err
	}
	logf("== %s: %s", col, c.fs)

	// Peers' servers live on this filesystem for the whole column.
	var pg *peers.Postgres
	var rv *peers.River
	var rd *peers.Redis
	var aq *peers.Asynq
	var rs *peers.RiverSQLite
	if !cfg.peers && cfg.pgWanted() {
		var err error
		logf("%s: starting PostgreSQL", col)
		if pg, err = peers.StartPostgres(filepath.Join(c.dir, "pg")); err != nil {
			// Smoke mode goes on without it, and says why.
			cfg.pg.skip = "PostgreSQL did not start: " + err.Error()
			r.Note("farro on PostgreSQL not measured on %s: %v", col, err)
			logf("%s: %s", col, cfg.pg.skip)
			pg = nil
		} else {
			defer pg.Stop()
		}
	}
	if cfg.peers && (cfg.want("throughput") || cfg.want("insert") || cfg.want("pickup") || cfg.pgWanted()) {
		var err error
		logf("%s: starting PostgreSQL and Redis", col)
		if pg, err = peers.StartPostgres(filepath.Join(c.dir, "pg")); err != nil {
			return err
		}
		defer pg.Stop()
		if rv, err = peers.NewRiver(ctx, pg.DSN); err != nil {
			return err
		}
		defer rv.Close()
		if rd, err = peers.StartRedis(filepath.Join(c.dir, "redis"), colLogs); err != nil {
			return err
		}
		defer rd.Stop()
		aq = peers.NewAsynq(rd.Addr)
		defer aq.Close()
		// River on SQLite: its database file on this filesystem too.
		sqliteDir := filepath.Join(c.dir, "riversqlite")
		if err := os.MkdirAll(sqliteDir, 0o755); err != nil {
			return err
		}
		if rs, err = peers.NewRiverSQLite(ctx, filepath.Join(sqliteDir, "river.db")); err != nil {
			return err
		}
		defer rs.Remove()
	}

	burnTimeout := max(3*time.Minute, time.Duration(cfg.n/20)*time.Second)
	if cfg.want("throughput") {
		var dbCPU func() (time.Duration, error)
		if pg != nil {
			dbCPU = pgOf(pg).CPU
		}
		if err := measureThroughput(ctx, cfg, r, bins, c, colLogs, rv, aq, rs, dbCPU, burnTimeout); err != nil {
			return err
		}
	}
	if pg != nil && cfg.pgWanted() {
		fpg := pgOf(pg)
		if cfg.want("throughput") {
			if err := measurePGThroughput(cfg, r, bins, c, colLogs, fpg, burnTimeout); err != nil {
				return err
			}
		}
		if cfg.want("pickup") {
			if err := measurePGPickup(cfg, r, bins, c, colLogs, fpg); err != nil {
				return err
			}
		}
		if cfg.want("pgclaim") && c.key == "root" {
			if err := measurePGClaim(cfg, r, fpg); err != nil {
				return err
			}
		}
	}
	if cfg.want("exec") {
		var execRates []float64
		for run := 1; run <= cfg.extraRuns; run++ {
			res, err := bins.BurnDown(farrob.BurnConfig{Base: c.dir, LogDir: colLogs, Jobs: cfg.execN, Kind: "exec", Agents: 1, Concurrency: 4, Exec: []string{"/bin/true"}, Timeout: burnTimeout})
			if err != nil {
				return err
			}
			execRates = append(execRates, res.Rate())
			logf("%s run %d: farro exec /bin/true: %.0f jobs/s", col, run, res.Rate())
		}
		txt, med := rateCell(execRates)
		r.Section(secExec).Set("farro-exec", fmt.Sprintf("farro: 1 agentd --concurrency 4 --exec /bin/true, N=%d", cfg.execN), col, txt, med)
	}
	if cfg.want("insert") {
		if err := measureInsert(ctx, cfg, r, bins, c, rv, aq, rs); err != nil {
			return err
		}
	}
	if cfg.want("pickup") {
		if err := measurePickup(ctx, cfg, r, bins, c, colLogs, rv, aq, rs); err != nil {
			return err
		}
	}
	if cfg.want("recovery") {
		if err := measureRecovery(cfg, r, bins, c, colLogs); err != nil {
			return err
		}
	}
	if cfg.want("steps") {
		n := pick2(cfg.mode == "full", 500, 100)
		steps, total, err := farrob.Steps(c.dir, n)
		if err != nil {
			return err
		}
		sec := r.Section(secSteps)
		for _, st := range steps {
			label := st.Name
			if st.Count != 1 {
				label += fmt.Sprintf(" (x%.2g)", st.Count)
			}
			sec.Set("step "+st.Name, label, col, fmt.Sprintf("%.3f", stats.Ms(st.Mean)), stats.Ms(st.Mean))
		}
		sec.Set("step total", fmt.Sprintf("total per job (%d jobs)", n), col, fmt.Sprintf("%.3f", stats.Ms(total)), stats.Ms(total))
		logf("%s: claim+commit %.2f ms per job in process", col, stats.Ms(total))
	}
	return nil
}

func pick2(full bool, fullV, smokeV int) int {
	if full {
		return fullV
	}
	return smokeV
}

func measureThroughput(ctx context.Context, cfg config, r *report.Report, bins farrob.Bins, c column, colLogs string, rv *peers.River, aq *peers.Asynq, rs *peers.RiverSQLite, dbCPU func() (time.Duration, error), burnTimeout time.Duration) error {
	col := c.key
	tp := r.Section(secThroughput)
	rates := map[string][]float64{}
	var riverDBCPU []float64 // PostgreSQL's CPU ms per job under River tuned
	var agentCPU []float64
	fb, err := floor.NewBench(c.dir, cfg.n)
	if err != nil {
		return err
	}
	defer fb.Close()
	for run := 1; run <= cfg.runs; run++ {
		if err := measureSpoolThroughput(cfg, run, rates, &agentCPU, fb, bins, c, colLogs, burnTimeout); err != nil {
			return err
		}
		if cfg.peers {
			for _, t := range []peers.RiverTuning{peers.RiverDefault, peers.RiverTuned} {
				n := cfg.n
				if t == peers.RiverDefault {
					n = cfg.riverDefN
				}
				if !cfg.measures("river-" + t.Name) {
					continue
				}
				cpu0, cpuErr := cpuOf(dbCPU)
				el, err := rv.BurnDown(ctx, t, n, burnTimeout)
				if err != nil {
					return err
				}
				if cpu1, err := cpuOf(dbCPU); t == peers.RiverTuned && cpuErr == nil && err == nil && dbCPU != nil {
					// Includes the InsertMany before River's clock starts.
					riverDBCPU = append(riverDBCPU, stats.Ms(cpu1-cpu0)/float64(n))
				}
				rate := float64(n) / el.Seconds()
				rates["river-"+t.Name] = append(rates["river-"+t.Name], rate)
				logf("%s run %d: River %s: %.0f jobs/s (%d jobs)", col, run, t.Name, rate, n)
			}
			if !cfg.measures("others") {
				continue
			}
			el, err := rs.BurnDown(ctx, peers.RiverTuned, cfg.n, burnTimeout)
			if err != nil {
				return err
			}
			rate := float64(cfg.n) / el.Seconds()
			rates["riversqlite-tuned"] = append(rates["riversqlite-tuned"], rate)
			logf("%s run %d: River SQLite tuned: %.0f jobs/s", col, run, rate)
			for _, t := range []peers.AsynqTuning{peers.AsynqDefault, peers.AsynqTuned} {
				el, err := aq.BurnDown(ctx, t, cfg.n, burnTimeout)
				if err != nil {
					return err
				}
				rate := float64(cfg.n) / el.Seconds()
				rates["asynq-"+t.Name] = append(rates["asynq-"+t.Name], rate)
				logf("%s run %d: asynq %s: %.0f jobs/s", col, run, t.Name, rate)
			}
		}
	}
	set := func(key, label string) {
		if txt, med := rateCell(rates[key]); txt != "" {
			tp.Set(key, label, col, txt, med)
		}
	}
	set("farro1x4", fmt.Sprintf("farro: 1 agentd --concurrency 4 (+managerd, watchdogd), N=%d", cfg.n))
	set("farro4x1", fmt.Sprintf("farro: 4 agentd --concurrency 1 (+managerd, watchdogd), N=%d, %d run", cfg.n, cfg.fourRuns))
	if cfg.peers {
		set("river-default", fmt.Sprintf("River default (MaxWorkers 4; FetchCooldown 100ms), N=%d", cfg.riverDefN))
		set("river-tuned", fmt.Sprintf("River tuned (FetchCooldown 1ms, FetchPollInterval 10ms), N=%d", cfg.n))
		set("riversqlite-tuned", fmt.Sprintf("River SQLite tuned (same; WAL, synchronous=FULL, 1 connection), N=%d", cfg.n))
		set("asynq-default", fmt.Sprintf("asynq default (Concurrency 4; Redis AOF always), N=%d", cfg.n))
		set("asynq-tuned", fmt.Sprintf("asynq tuned (TaskCheckInterval 10ms; AOF always), N=%d", cfg.n))
	}
	for _, v := range floor.Variants {
		syncs := stats.Median(rates["floorsyncs-"+v.Key()])
		set("floor-"+v.Key(), fmt.Sprintf("floor: %s (%.2g fsyncs/job)", v, syncs))
	}
	for _, v := range floor.Experiments {
		if txt, med := rateCell(rates["floor-"+v.Key()]); txt != "" {
			syncs := stats.Median(rates["floorsyncs-"+v.Key()])
			r.Section(secExperiment).Set("floor-"+v.Key(), fmt.Sprintf("%s (%.2g fsyncs/job)", v, syncs), col, txt, med)
		}
	}
	if len(agentCPU) > 0 {
		tp.Set("farro-cpu", "  farro agentd CPU per job (ms, median)", col, fmt.Sprintf("%.2f", stats.Median(agentCPU)), stats.Median(agentCPU))
	}
	if len(riverDBCPU) > 0 {
		m := stats.Median(riverDBCPU)
		tp.Set("river-dbcpu", "  River tuned: PostgreSQL CPU per job, its InsertMany included (ms, median)", col, fmt.Sprintf("%.2f", m), m)
	}
	return nil
}

// measureSpoolThroughput is one run of section 1's spool and floor rows
// (none with -pg-only).
func measureSpoolThroughput(cfg config, run int, rates map[string][]float64, agentCPU *[]float64, fb *floor.Bench, bins farrob.Bins, c column, colLogs string, burnTimeout time.Duration) error {
	if !cfg.measures("spool") {
		return nil
	}
	col := c.key
	for _, v := range append(append([]floor.Variant(nil), floor.Variants...), floor.Experiments...) {
		res, err := fb.Run(v, 4, cfg.floorMax)
		if err != nil {
			return err
		}
		rates["floor-"+v.Key()] = append(rates["floor-"+v.Key()], res.Rate())
		rates["floorsyncs-"+v.Key()] = append(rates["floorsyncs-"+v.Key()], res.SyncsPerJob())
		logf("%s run %d: floor %-34s %6.0f jobs/s (%d jobs, %.2f fsyncs/job)", col, run, v, res.Rate(), res.Jobs, res.SyncsPerJob())
	}
	res, err := bins.BurnDown(farrob.BurnConfig{Base: c.dir, LogDir: colLogs, Jobs: cfg.n, Kind: "noop", Agents: 1, Concurrency: 4, Timeout: burnTimeout})
	if err != nil {
		return err
	}
	rates["farro1x4"] = append(rates["farro1x4"], res.Rate())
	*agentCPU = append(*agentCPU, stats.Ms(res.AgentCPU)/float64(res.Jobs))
	logf("%s run %d: farro 1 agentd x4: %.0f jobs/s (agentd CPU %.2f ms/job)", col, run, res.Rate(), stats.Ms(res.AgentCPU)/float64(res.Jobs))
	if run <= cfg.fourRuns {
		res, err := bins.BurnDown(farrob.BurnConfig{Base: c.dir, LogDir: colLogs, Jobs: cfg.n, Kind: "noop", Agents: 4, Concurrency: 1, Timeout: burnTimeout})
		if err != nil {
			return err
		}
		rates["farro4x1"] = append(rates["farro4x1"], res.Rate())
		logf("%s run %d: farro 4 agentd x1: %.0f jobs/s", col, run, res.Rate())
	}
	return nil
}

func measureInsert(ctx context.Context, cfg config, r *report.Report, bins farrob.Bins, c column, rv *peers.River, aq *peers.Asynq, rs *peers.RiverSQLite) error {
	col := c.key
	ins := r.Section(secInsert)
	if res, err := bins.SubmitCLI(c.dir, cfg.cliN); err != nil {
		return err
	} else {
		ins.Set("ins-cli", fmt.Sprintf("farroctl submit, one process per job (%d jobs)", cfg.cliN), col, fmt.Sprintf("%.0f", res.Rate()), res.Rate())
		logf("%s: farroctl submit one by one: %.0f jobs/s", col, res.Rate())
	}
	if err := measureStart(cfg, r, bins, c); err != nil {
		return err
	}
	if res, err := bins.SubmitBatch(c.dir, cfg.insertN); err != nil {
		return err
	} else {
		ins.Set("ins-batch", fmt.Sprintf("farroctl submit --batch, one process (%d jobs)", cfg.insertN), col, fmt.Sprintf("%.0f", res.Rate()), res.Rate())
		logf("%s: farroctl submit --batch: %.0f jobs/s", col, res.Rate())
	}
	for _, g := range []int{1, 4} {
		res, err := farrob.SubmitLib(c.dir, cfg.insertN, g)
		if err != nil {
			return err
		}
		key := fmt.Sprintf("ins-lib%d", g)
		ins.Set(key, fmt.Sprintf("farro pkg/job Spool.Submit, %d goroutine(s) (%d jobs)", g, cfg.insertN), col, fmt.Sprintf("%.0f", res.Rate()), res.Rate())
		logf("%s: Spool.Submit x%d: %.0f jobs/s", col, g, res.Rate())
	}
	if res, err := farrob.SubmitManyLib(c.dir, cfg.n, 1000); err != nil {
		return err
	} else {
		ins.Set("ins-many", fmt.Sprintf("farro pkg/job Spool.SubmitMany, batches of 1000 (%d jobs)", cfg.n), col, fmt.Sprintf("%.0f", res.Rate()), res.Rate())
		logf("%s: Spool.SubmitMany: %.0f jobs/s", col, res.Rate())
	}
	if cfg.peers {
		el, err := rv.InsertOne(ctx, cfg.insertN)
		if err != nil {
			return err
		}
		rate := float64(cfg.insertN) / el.Seconds()
		ins.Set("ins-river1", fmt.Sprintf("River Insert, one transaction per job (%d jobs)", cfg.insertN), col, fmt.Sprintf("%.0f", rate), rate)
		el, err = rv.InsertMany(ctx, cfg.n)
		if err != nil {
			return err
		}
		rate = float64(cfg.n) / el.Seconds()
		ins.Set("ins-riverm", fmt.Sprintf("River InsertMany, batches of 1000 (%d jobs)", cfg.n), col, fmt.Sprintf("%.0f", rate), rate)
		if el, err = rs.InsertOne(ctx, cfg.insertN); err != nil {
			return err
		}
		rate = float64(cfg.insertN) / el.Seconds()
		ins.Set("ins-riversqlite-1", fmt.Sprintf("River SQLite Insert, one transaction per job (%d jobs)", cfg.insertN), col, fmt.Sprintf("%.0f", rate), rate)
		if el, err = rs.InsertMany(ctx, cfg.n); err != nil {
			return err
		}
		rate = float64(cfg.n) / el.Seconds()
		ins.Set("ins-riversqlite-m", fmt.Sprintf("River SQLite InsertMany, batches of 1000 (%d jobs)", cfg.n), col, fmt.Sprintf("%.0f", rate), rate)
		el, err = aq.Enqueue(ctx, cfg.insertN)
		if err != nil {
			return err
		}
		rate = float64(cfg.insertN) / el.Seconds()
		ins.Set("ins-asynq", fmt.Sprintf("asynq Enqueue, sequential (%d jobs)", cfg.insertN), col, fmt.Sprintf("%.0f", rate), rate)
		logf("%s: inserts of the peers done", col)
	}
	return nil
}

func measurePickup(ctx context.Context, cfg config, r *report.Report, bins farrob.Bins, c column, colLogs string, rv *peers.River, aq *peers.Asynq, rs *peers.RiverSQLite) error {
	col := c.key
	pk := r.Section(secPickup)
	setLat := func(key, label string, l stats.Latency) {
		pk.Set(key, label, col, latCell(l), stats.Ms(l.P99))
		r.SetNum(key+".p50", col, stats.Ms(l.P50))
		logf("%s: pickup %s: %s ms", col, key, latCell(l))
	}
	if cfg.measures("spool") {
		pr, err := bins.Pickup(c.dir, colLogs, cfg.probes)
		if err != nil {
			return err
		}
		setLat("pick-farro", fmt.Sprintf("farro: Spool.Submit -> exec handler (sh) running, %d probes", cfg.probes), pr.Start)
		setLat("pick-farro-claim", "farro: Spool.Submit -> claim's rename into in-progress/ (inotify)", pr.Claim)
		setLat("pick-farro-submit", "  farro: Spool.Submit alone (durable insert)", pr.Submit)
	}
	if cfg.peers {
		for _, t := range []peers.RiverTuning{peers.RiverDefault, peers.RiverTuned} {
			if !cfg.measures("river-" + t.Name) {
				continue
			}
			l, err := rv.Pickup(ctx, t, cfg.probes)
			if err != nil {
				return err
			}
			setLat("pick-river-"+t.Name, fmt.Sprintf("River %s: Insert -> Work", t.Name), l)
		}
		if cfg.measures("others") {
			l, err := rs.Pickup(ctx, peers.RiverTuned, cfg.probes)
			if err != nil {
				return err
			}
			setLat("pick-riversqlite-tuned", "River SQLite tuned: Insert -> Work", l)
			for _, t := range []peers.AsynqTuning{peers.AsynqDefault, peers.AsynqTuned} {
				l, err := aq.Pickup(ctx, t, cfg.probes)
				if err != nil {
					return err
				}
				setLat("pick-asynq-"+t.Name, fmt.Sprintf("asynq %s: Enqueue -> handler", t.Name), l)
			}
		}
	}
	if !cfg.measures("spool") {
		return nil
	}
	fl, err := floor.Pickup(c.dir, cfg.probes)
	if err != nil {
		return err
	}
	setLat("pick-floor", "floor: durable submit -> inotify -> claim (mkdir, rename, 2 fsyncs)", fl)
	return nil
}

func measureRecovery(cfg config, r *report.Report, bins farrob.Bins, c column, colLogs string) error {
	col := c.key
	rc := r.Section(secRecovery)
	rl, err := bins.Recovery(c.dir, colLogs, cfg.kills)
	if err != nil {
		return err
	}
	rc.Set("rec-farro", fmt.Sprintf("farro: p50 / p99 over %d kills (watchdogd --interval 500ms)", cfg.kills), col,
		fmt.Sprintf("%.2f s / %.2f s", rl.P50.Seconds(), rl.P99.Seconds()), rl.P99.Seconds())
	r.SetNum("rec-farro.p50", col, rl.P50.Seconds())
	logf("%s: recovery p50 %s p99 %s", col, rl.P50, rl.P99)
	if cfg.peers {
		rc.Set("rec-river", "River: not probed; defaults quoted (RescueStuckJobsAfter 1h, rescuer every 30s)", col, ">= 3600 s", 3600)
		rc.Set("rec-asynq", "asynq: not probed; defaults quoted (lease 30s + 30s skew cutoff, recoverer every 1m, retry delay >= 15s)", col, "~75..135 s", 75)
	}
	return nil
}

func kfmt(n int) string {
	switch {
	case n >= 1000000 && n%1000000 == 0:
		return fmt.Sprintf("%dM", n/1000000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

// scaleDeferred is how many deferred jobs the scale section puts beside
// N queued ones: a tenth, so that managerd's rescans of deferred/ grow
// with N too.
func scaleDeferred(n int) int { return max(1, n/10) }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func mib(kib int64) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }

func scaleTitle(c column) string {
	return fmt.Sprintf("6. Scale on the %s filesystem: N jobs queued, then N jobs in completed/succeeded/", c.key)
}

func measureScale(cfg config, r *report.Report, bins farrob.Bins, c column, logDir string) error {
	sec := r.Section(scaleTitle(c))
	scaleLogs := filepath.Join(logDir, "scale")
	if err := os.MkdirAll(scaleLogs, 0o755); err != nil {
		return err
	}
	for _, n := range cfg.scale {
		col := kfmt(n)
		sec.Cols = append(sec.Cols, col)
		logf("scale %s: filling", col)
		res, err := bins.Scale(farrob.ScaleConfig{Base: c.dir, LogDir: scaleLogs, Queued: n, Claims: cfg.claims, BurnJobs: cfg.scaleBurn,
			Deferred: scaleDeferred(n), IdleWindow: cfg.scaleIdle, Logf: logf})
		if err != nil {
			return err
		}
		ms := func(d time.Duration) string { return fmtMs(d) }
		sec.Set("sc-fill", "fixture: time to queue N jobs (not a farro figure) (s)", col, fmt.Sprintf("%.1f", res.Fill.Seconds()), res.Fill.Seconds())
		sec.Set("sc-claim", fmt.Sprintf("Spool.Claim in process, p50 / p99 over %d claims (ms)", res.Claim.N), col, latCell(res.Claim), stats.Ms(res.Claim.P50))
		perJob := stats.Ms(res.Burn.Elapsed) / float64(res.Burn.Jobs)
		sec.Set("sc-agent-rate", fmt.Sprintf("agentd x4 at depth N, after ready: next <= %d jobs (jobs/s)", cfg.scaleBurn), col, fmt.Sprintf("%.0f", res.Burn.Rate()), res.Burn.Rate())
		sec.Set("sc-agent-ms", "agentd x4 at depth N: wall ms per job", col, fmt.Sprintf("%.2f", perJob), perJob)
		sec.Set("sc-agent-cpu", "agentd CPU ms per job at depth N", col, fmt.Sprintf("%.2f", stats.Ms(res.Burn.AgentCPU)/float64(res.Burn.Jobs)), stats.Ms(res.Burn.AgentCPU)/float64(res.Burn.Jobs))
		sec.Set("sc-agent-ready", "agentd start -> ready (index of incoming/ built) (ms)", col, ms(res.AgentReady), stats.Ms(res.AgentReady))
		sec.Set("sc-agent-first", "agentd start -> first job succeeded (ms)", col, ms(res.FirstJob), stats.Ms(res.FirstJob))
		sec.Set("sc-wd-ready", "watchdogd / managerd start -> ready, N queued (ms)", col, ms(res.WDReady)+" / "+ms(res.MDReady), stats.Ms(max(res.WDReady, res.MDReady)))
		first := "first claim"
		if res.FirstClaim != res.PrioID {
			first = "NOT the first claim: " + res.FirstClaim
		}
		sec.Set("sc-prio", fmt.Sprintf("agentd (--concurrency 1) start -> claim of the priority-%d job submitted last (ms)", farrob.PrioJobPriority), col,
			ms(res.PrioClaim)+" ("+first+")", stats.Ms(res.PrioClaim))
		r.SetNum("sc-prio-first", col, b2f(res.FirstClaim == res.PrioID))
		sec.Set("sc-wd-recover", "watchdogd start -> dead agent's job in stale/ / -> startup pass done (ms)", col,
			ms(res.WDRecover)+" / "+ms(res.WDPass), stats.Ms(res.WDRecover))
		r.SetNum("sc-wd-pass", col, stats.Ms(res.WDPass))
		sec.Set("sc-idle", fmt.Sprintf("idle CPU over %s, N queued + N/10 deferred, no agent: watchdogd / managerd (ms per s)", cfg.scaleIdle), col,
			fmt.Sprintf("%.2f / %.2f", res.IdleWD, res.IdleMD), max(res.IdleWD, res.IdleMD))
		r.SetNum("sc-idle-wd", col, res.IdleWD)
		r.SetNum("sc-idle-md", col, res.IdleMD)
		sec.Set("sc-rss", "RSS peak (VmHWM) agentd / managerd / watchdogd, N queued (MiB)", col,
			mib(res.AgentMem.HWM)+" / "+mib(res.MDMem.HWM)+" / "+mib(res.WDMem.HWM), float64(max(res.AgentMem.HWM, res.MDMem.HWM, res.WDMem.HWM))/1024)
		sec.Set("sc-md-cycle", "completed/: managerd pass, 1st / 2nd (ms, in process)", col, ms(res.MDCycle1)+" / "+ms(res.MDCycle2), stats.Ms(res.MDCycle2))
		sec.Set("sc-md-ret", "completed/: managerd pass with --retention 720h (ms)", col, ms(res.MDRetentionCycle), stats.Ms(res.MDRetentionCycle))
		sec.Set("sc-wd-cycle", "completed/: watchdogd pass, 1st (startup reconcile) / 2nd (ms)", col, ms(res.WDCycle1)+" / "+ms(res.WDCycle2), stats.Ms(res.WDCycle2))
		sec.Set("sc-done-ready", "completed/: watchdogd / managerd start -> ready (ms)", col, ms(res.DoneWDReady)+" / "+ms(res.DoneMDReady), stats.Ms(max(res.DoneWDReady, res.DoneMDReady)))
		sec.Set("sc-done-rss", "completed/: RSS peak managerd / watchdogd (MiB)", col, mib(res.DoneMDMem.HWM)+" / "+mib(res.DoneWDMem.HWM), float64(max(res.DoneMDMem.HWM, res.DoneWDMem.HWM))/1024)
		sec.Set("sc-done-idle", fmt.Sprintf("completed/: idle CPU over %s, after the startup pass: agentd / managerd / watchdogd (ms per s)", cfg.scaleIdle), col,
			fmt.Sprintf("%.2f / %.2f / %.2f", res.DoneIdleAgent, res.DoneIdleMD, res.DoneIdleWD), max(res.DoneIdleAgent, res.DoneIdleMD, res.DoneIdleWD))
		r.SetNum("sc-done-idle-agent", col, res.DoneIdleAgent)
		r.SetNum("sc-done-idle-md", col, res.DoneIdleMD)
		r.SetNum("sc-done-idle-wd", col, res.DoneIdleWD)
		logf("scale %s: claim %s ms, agentd %.0f jobs/s, ready %s, RSS agentd %s MiB, wd 1st pass over completed %s", col, latCell(res.Claim), res.Burn.Rate(), res.AgentReady, mib(res.AgentMem.HWM), res.WDCycle1)
	}
	return nil
}

func notes(cfg config, r *report.Report) {
	r.Note("Durability: every farro, River and asynq figure is for the configuration that survives a power cut: farro's defaults (submit, claim and commit group-committed: a shared syncfs barrier before each job.json replace and before each move is acknowledged; moves under lock fsync every step), PostgreSQL fsync=on synchronous_commit=on, Redis appendonly yes + appendfsync always. The floor's 'no fsync' and 'group commit' rows are reference points, not configurations farro may ship.")
	r.Note("Burn-down: all N jobs are queued before the clock starts (farro: written by the benchmark's fixture with the files Spool.Submit writes, then syncfs; River: InsertMany; asynq: Enqueue). The clock runs from starting the workers (farro: exec of agentd, managerd and watchdogd already running and ready) until every job is durably completed: farro counts completed/succeeded/ by listing it every 10 ms, River polls SELECT count(*) ... state='completed', asynq polls its processed counter (incremented when a task is acked in Redis).")
	if cfg.peers {
		r.Note("River default is measured on fewer jobs (N=%d): its rate is bounded by FetchCooldown (100 ms per fetch of up to MaxWorkers jobs), not by N.", cfg.riverDefN)
		r.Note("River SQLite: River's riversqlite driver on modernc.org/sqlite (pure Go), one database file on the column's filesystem, journal_mode=WAL, synchronous=FULL (the WAL is fsynced at every commit), busy_timeout %s, a pool of one connection (River's recommendation: SQLite has one writer at a time); tuned as River tuned. Its driver completes and inserts jobs one row at a time (InsertMany too).", peers.SQLiteBusyTimeout)
	}
	r.Note("Process start: farroctl --version and a minimal Go binary (a hello world built into the work dir by the same go command) are run the same number of times, interleaved, each timed from fork to exit.")
	r.Note("Pickup: one job at a time on an idle queue, the next 150..250 ms (random) after the previous one was handled, for every system (River sends at most one insert notification per FetchCooldown, so closer probes would measure its 1 s poll instead). farro's handler is agentd's exec handler running /bin/sh -c 'printf ... > FIFO' (the benchmark timestamps the line it reads); the 'claim' row is the inotify event of the job's rename into in-progress/<agent>/, before the claim's job.json rewrite. River and asynq handlers are in-process Go functions.")
	r.Note("Recovery: two agentd (--concurrency 1, exec handler 'sleep 30'), one job with max_attempts 1000; each probe SIGKILLs the agent holding it and polls every 1 ms for the job in the other agent's in-progress/ dir, then restarts the killed agent. River and asynq are quoted, not probed: with their defaults a probe takes an hour (River) or one to two minutes (asynq).")
	pgNotes(cfg, r)
	r.Note("Goals of the crawl and of the frontier at scale are in make bench-crawl's table.")
	r.Note("Scale: in-process Spool.Claim (no daemon running) on the oldest jobs; agentd figures are the next jobs after the claims, at depth ~N. Cycle times call internal/manager and internal/watchdog RunOnce in process on a spool holding N jobs in completed/succeeded/. Scale runs on the first column's filesystem only.")
	r.Note("Scale probes: N/10 deferred jobs lie beside the queue. Before the daemons start, the newest queued job is claimed by a child process that is then SIGKILLed (its lock names a dead PID), and a priority-%d job is submitted last (Spool.Submit, with its hint). Times come from the events the daemons wrote in the jobs' events.jsonl: watchdogd start -> the dead agent's job in stale/ (the startup pass's end is its log line); agentd --concurrency 1 start -> the priority job's claim, which must be the first queued -> in-progress line of its log. Idle CPU: utime+stime from /proc over %s once the daemons are ready and watchdogd's startup pass is done (no agent on the queued spool; an idle agentd --concurrency 4 on the completed one). The goal allows each daemon 2x its idle CPU per second at 1k, or 10 ms/s (1%% of a core) whatever the ratio.", farrob.PrioJobPriority, cfg.scaleIdle)
}
