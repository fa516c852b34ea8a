// Command crawlbench measures farro's crawl frontier against a Colly
// crawler and wget --recursive: pages per second crawling one generated
// site served by a private nginx on loopback, politeness off, duplicate
// fetches counted from nginx's own access log, peak RSS, and farro's
// frontier memory and disk per million discovered URLs; then a real
// HTML tree nobody here wrote (Debian's postgresql-doc-15) crawled once
// by each, compared with wget's fetched set (internal/realsite).
//
//	go run ./cmd/crawlbench               # full: 10,000 pages, medians of 3 runs
//	go run ./cmd/crawlbench -mode smoke   # 300 pages, 1 run, under a minute
//
// nginx and wget are installed from Debian's packages if missing; nginx
// runs with its own configuration under the work directory and is stopped
// by PID, like every process the benchmark starts.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/farro-dev/farro/bench/internal/cli"
	"github.com/farro-dev/farro/bench/internal/crawlb"
	"github.com/farro-dev/farro/bench/internal/farrob"
	"github.com/farro-dev/farro/bench/internal/stats"
	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/internal/realsite"
)

type config struct {
	mode       string
	pages      int
	runs       int
	conc       int
	parallel   int
	strace     bool
	perf       bool
	farroRoot  string
	workParent string
	out        string
	keep       bool
	timeout    time.Duration
}

func parseFlags() config {
	var c config
	flag.StringVar(&c.mode, "mode", "full", "full (10,000 pages, 3 runs, strace profile) or smoke (300 pages, 1 run)")
	pages := flag.Int("pages", 0, "pages of the generated site (default: 10000 full, 300 smoke)")
	runs := flag.Int("runs", 0, "runs per tool; medians are reported (default: 3 full, 1 smoke)")
	flag.IntVar(&c.conc, "concurrency", 32, "farro: agentd --concurrency")
	flag.IntVar(&c.parallel, "parallel", 8, "Colly: LimitRule Parallelism (and MaxIdleConnsPerHost of its second variant)")
	st := flag.String("strace", "", "one extra farro run under strace -c -f (syscalls and fsyncs per page): yes|no (default: yes full, no smoke)")
	flag.BoolVar(&c.perf, "perf", false, "one extra farro run under perf record (agentd, managerd): the top symbols by CPU")
	flag.StringVar(&c.farroRoot, "farro", "..", "farro's checkout (its binaries are built from it)")
	flag.StringVar(&c.workParent, "work", "", "parent of the temporary work directory (default: $TMPDIR or /tmp)")
	flag.StringVar(&c.out, "out", "", "also write the table to this file")
	flag.BoolVar(&c.keep, "keep", false, "keep the work directory (site, spools, logs)")
	flag.Parse()
	full := c.mode == "full"
	if !full && c.mode != "smoke" {
		fatalf("-mode must be full or smoke")
	}
	pick := func(v, f, s int) int {
		if v > 0 {
			return v
		}
		if full {
			return f
		}
		return s
	}
	c.pages = pick(*pages, 10000, 300)
	c.runs = pick(*runs, 3, 1)
	switch *st {
	case "":
		c.strace = full
	case "yes":
		c.strace = true
	case "no":
		c.strace = false
	default:
		fatalf("-strace: yes or no")
	}
	c.timeout = max(2*time.Minute, time.Duration(c.pages/10)*time.Second)
	return c
}

var (
	fatalf = cli.Fatalf
	logf   = cli.Logf
)

func main() {
	cli.SetName("crawlbench")
	cfg := parseFlags()
	cli.Main(func() error { return run(cfg) })
}

// tool is one crawler of the comparison.
type tool struct {
	key, label string
	run        func(round int) (crawlb.Run, error)
	runs       []crawlb.Run
}

func run(cfg config) error {
	machine := sys.ReadMachine()
	loadStart := sys.LoadAvg()
	farroRoot, err := filepath.Abs(cfg.farroRoot)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(farroRoot, "cmd", "agentd")); err != nil {
		return fmt.Errorf("-farro %s is not farro's checkout (no cmd/agentd)", farroRoot)
	}
	work, err := os.MkdirTemp(cfg.workParent, "farro-crawlbench-")
	if err != nil {
		return err
	}
	if err := os.Chmod(work, 0o755); err != nil { // nginx's workers run as nobody
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
	logf("mode %s, %d pages, %d run(s), work dir %s", cfg.mode, cfg.pages, cfg.runs, work)
	if err := crawlb.EnsureTools(logf); err != nil {
		return err
	}
	logf("building farro from %s and the Colly crawler", farroRoot)
	bins, err := farrob.Build(farroRoot, filepath.Join(work, "bin"))
	if err != nil {
		return err
	}
	collyBin := filepath.Join(work, "bin", "collycrawl")
	if out, err := exec.Command("go", "build", "-mod=mod", "-o", collyBin, "./cmd/collycrawl").CombinedOutput(); err != nil {
		return fmt.Errorf("go build collycrawl: %v: %s", err, out)
	}
	logf("generating the site")
	site, err := crawlb.Generate(filepath.Join(work, "site"), cfg.pages)
	if err != nil {
		return err
	}
	ng, err := crawlb.StartNginx(filepath.Join(work, "nginx"), site.Dir)
	if err != nil {
		return err
	}
	cli.AddCleanup(ng.Stop)
	logf("nginx on 127.0.0.1:%d", ng.Port)

	loads := sampleLoad()
	tools := []*tool{
		{key: "wget", label: "wget --recursive (1 connection)", run: func(int) (crawlb.Run, error) {
			return crawlb.Wget(ng, work, logDir, cfg.timeout)
		}},
		{key: "colly", label: fmt.Sprintf("Colly, Parallelism %d", cfg.parallel), run: func(int) (crawlb.Run, error) {
			return crawlb.Colly(collyBin, ng.URL(crawlb.SeedPath), cfg.parallel, 0, logDir, cfg.timeout)
		}},
		{key: "colly-idle", label: fmt.Sprintf("Colly, Parallelism %d, MaxIdleConnsPerHost %d", cfg.parallel, cfg.parallel), run: func(int) (crawlb.Run, error) {
			return crawlb.Colly(collyBin, ng.URL(crawlb.SeedPath), cfg.parallel, cfg.parallel, logDir, cfg.timeout)
		}},
		{key: "farro", label: fmt.Sprintf("farro: agentd --concurrency %d, managerd, watchdogd", cfg.concurrency()), run: func(round int) (crawlb.Run, error) {
			return crawlb.Farro(crawlb.FarroConfig{Bins: bins, Dir: filepath.Join(work, fmt.Sprintf("farro-%d", round)), LogDir: logDir,
				Concurrency: cfg.conc, Seed: ng.URL(crawlb.SeedPath), Timeout: cfg.timeout, Keep: cfg.keep})
		}},
	}
	// Rounds interleave the tools, so that a change of load on the
	// machine falls on all of them alike.
	for round := 1; round <= cfg.runs; round++ {
		for _, t := range tools {
			if _, err := ng.TakeLog(); err != nil { // start from an empty log
				return err
			}
			r, err := t.run(round)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", t.key, round, err)
			}
			es, err := ng.TakeLog()
			if err != nil {
				return err
			}
			r.Log = crawlb.Stats(es)
			t.runs = append(t.runs, r)
			logf("run %d %-10s %6.0f pages/s: %d pages in %s, %d requests, %d duplicates, peak RSS %.1f MiB",
				round, t.key, r.Rate(), r.Log.Pages, r.Elapsed.Round(time.Millisecond), r.Log.Requests, r.Log.Duplicates, mib(r.PeakKiB))
		}
	}
	// The real tree: once per tool, in both modes (about 1,170 pages);
	// Colly in full mode only (it refetches every page linked with a
	// fragment: half a minute here, too long for the smoke run).
	if err := crawlb.EnsureRealTree(logf); err != nil {
		return err
	}
	realColly := ""
	if cfg.mode == "full" {
		realColly = collyBin
	}
	real, err := crawlb.RunRealTree(crawlb.RealTreeConfig{Work: work, LogDir: logDir, Bins: bins, CollyBin: realColly,
		Parallel: cfg.parallel, Concurrency: cfg.conc, Timeout: cfg.timeout, Keep: cfg.keep}, logf)
	if err != nil {
		return err
	}

	var prof *crawlb.Run
	if cfg.strace {
		if _, err := exec.LookPath("strace"); err != nil {
			logf("no strace: profile skipped")
		} else {
			logf("farro once more under strace -c -f (not in the medians)")
			_, _ = ng.TakeLog()
			r, err := crawlb.Farro(crawlb.FarroConfig{Bins: bins, Dir: filepath.Join(work, "farro-strace"), LogDir: logDir,
				Concurrency: cfg.conc, Seed: ng.URL(crawlb.SeedPath), Timeout: 4 * cfg.timeout, MaxPages: min(cfg.pages, 2000), Strace: true, Keep: cfg.keep})
			if err != nil {
				return fmt.Errorf("farro under strace: %w", err)
			}
			es, _ := ng.TakeLog()
			r.Log = crawlb.Stats(es)
			prof = &r
		}
	}

	var perfRun *crawlb.Run
	if cfg.perf {
		if _, err := exec.LookPath("perf"); err != nil {
			logf("no perf: CPU profile skipped")
		} else {
			logf("farro once more under perf record (not in the medians)")
			_, _ = ng.TakeLog()
			r, err := crawlb.Farro(crawlb.FarroConfig{Bins: bins, Dir: filepath.Join(work, "farro-perf"), LogDir: logDir,
				Concurrency: cfg.conc, Seed: ng.URL(crawlb.SeedPath), Timeout: 4 * cfg.timeout, MaxPages: min(cfg.pages, 2000), Perf: true, Keep: cfg.keep})
			if err != nil {
				return fmt.Errorf("farro under perf: %w", err)
			}
			es, _ := ng.TakeLog()
			r.Log = crawlb.Stats(es)
			perfRun = &r
		}
	}
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
	render(w, cfg, machine, farroRoot, loadStart+" at start, "+loads()+" during the runs", site, tools, prof, perfRun, real)
	return nil
}

func (c config) concurrency() int { return c.conc }

func mib(kib int64) float64 { return float64(kib) / 1024 }

func medianOf(runs []crawlb.Run, f func(crawlb.Run) float64) (med, lo, hi float64) {
	var xs []float64
	for _, r := range runs {
		xs = append(xs, f(r))
	}
	if len(xs) == 0 {
		return 0, 0, 0
	}
	lo, hi = xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return stats.Median(xs), lo, hi
}

func cell(runs []crawlb.Run, format string, f func(crawlb.Run) float64) string {
	med, lo, hi := medianOf(runs, f)
	if len(runs) == 1 {
		return fmt.Sprintf(format, med)
	}
	return fmt.Sprintf(format+" ["+format+".."+format+"]", med, lo, hi)
}

func render(w io.Writer, cfg config, machine sys.Machine, farroRoot, loadStart string, site *crawlb.Site, tools []*tool, prof, perfRun *crawlb.Run, real *crawlb.RealTree) {
	fmt.Fprintf(w, "farro crawl benchmark, mode %s, %s\n", cfg.mode, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "machine: %s\n", machine)
	fmt.Fprintf(w, "farro:   %s\n", describeCheckout(farroRoot))
	fmt.Fprintf(w, "site:    %d pages, %.1f KiB each on average, %.1f links per page, nginx %s on 127.0.0.1 (sendfile, keep-alive)\n",
		site.Pages, float64(site.Bytes)/float64(site.Pages)/1024, float64(site.Links)/float64(site.Pages), nginxVersion())
	fmt.Fprintf(w, "load:    1-minute load average %s, %s at the end (other work on the machine skews the figures)\n\n", loadStart, sys.LoadAvg())

	fmt.Fprintf(w, "1. Crawl of the whole site, politeness off (median [min..max] of %d run(s))\n", cfg.runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tpages/s\tseconds\tpages\trequests\tduplicate fetches\tpeak RSS MiB\t")
	for _, t := range tools {
		dups := make([]string, 0, len(t.runs))
		for _, r := range t.runs {
			dups = append(dups, fmt.Sprint(r.Log.Duplicates))
		}
		rss := cell(t.runs, "%.1f", func(r crawlb.Run) float64 { return mib(r.PeakKiB) })
		if t.key == "farro" {
			rss = cell(t.runs, "%.1f", func(r crawlb.Run) float64 { return mib(r.PeakKiB) }) + " max / " +
				cell(t.runs, "%.1f", func(r crawlb.Run) float64 { return mib(r.SumKiB) }) + " sum"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", t.label,
			cell(t.runs, "%.0f", crawlb.Run.Rate),
			cell(t.runs, "%.2f", func(r crawlb.Run) float64 { return r.Elapsed.Seconds() }),
			cell(t.runs, "%.0f", func(r crawlb.Run) float64 { return float64(r.Log.Pages) }),
			cell(t.runs, "%.0f", func(r crawlb.Run) float64 { return float64(r.Log.Requests) }),
			strings.Join(dups, ", "), rss)
	}
	tw.Flush()

	var fr []crawlb.Run
	for _, t := range tools {
		if t.key == "farro" {
			fr = t.runs
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "2. farro's daemons during the crawl (median of the runs)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tCPU ms per page\tCPU share\tpeak RSS MiB\t")
	for _, d := range []string{"agentd", "managerd", "watchdogd"} {
		cpuPer := func(r crawlb.Run) float64 {
			return float64(r.Farro.CPU[d].Microseconds()) / 1000 / float64(max(r.Log.Pages, 1))
		}
		share := func(r crawlb.Run) float64 {
			var tot time.Duration
			for _, c := range r.Farro.CPU {
				tot += c
			}
			return 100 * float64(r.Farro.CPU[d]) / float64(max(tot, 1))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", d, cell(fr, "%.2f", cpuPer), cell(fr, "%.0f%%", share),
			cell(fr, "%.1f", func(r crawlb.Run) float64 { return mib(r.Farro.PeakKiB[d]) }))
	}
	fmt.Fprintf(tw, "URL jobs in flight (released, not ingested), mean of the status polls\t%s\t\t\t\n", cell(fr, "%.1f", func(r crawlb.Run) float64 { return r.Farro.InFlight }))
	for _, st := range []struct{ key, label string }{
		{"queued", "of which queued in incoming/ (waiting for an agent slot)"},
		{"in-progress", "of which running in agentd"},
	} {
		fmt.Fprintf(tw, "  %s, mean\t%s\t\t\t\n", st.label, cell(fr, "%.1f", func(r crawlb.Run) float64 { return r.Farro.States[st.key] }))
	}
	fmt.Fprintf(tw, "  %s, mean\t%s\t\t\t\n", "of which finished, waiting for the frontier to ingest them (the rest)", cell(fr, "%.1f", func(r crawlb.Run) float64 {
		return r.Farro.InFlight - r.Farro.States["queued"] - r.Farro.States["in-progress"]
	}))
	fmt.Fprintf(tw, "all three, per page of wall time\t%s\t\t\t\n", cell(fr, "%.2f", func(r crawlb.Run) float64 {
		return float64(r.Elapsed.Microseconds()) / 1000 / float64(max(r.Log.Pages, 1))
	}))
	tw.Flush()

	fmt.Fprintln(w)
	fmt.Fprintln(w, "3. farro's frontier memory and disk, measured at the site's size and extrapolated linearly to 1,000,000 discovered URLs")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tmeasured\tper discovered URL\tper 1M URLs (extrapolated)\t")
	per := func(f func(crawlb.Run) float64, unit string, scale float64) {
		// f gives a total; print the total, per URL (bytes) and per million.
		med, _, _ := medianOf(fr, f)
		disc, _, _ := medianOf(fr, func(r crawlb.Run) float64 { return float64(r.Farro.Status.Discovered) })
		if disc == 0 {
			disc = 1
		}
		fmt.Fprintf(tw, "%s\t%.1f MiB\t%.0f B\t%.0f MiB\t\n", unit, med/scale, med/disc, med/disc*1e6/scale)
	}
	const m = 1 << 20
	per(func(r crawlb.Run) float64 { return float64(r.Farro.PeakKiB["managerd"]-r.Farro.MgrBaseKiB) * 1024 }, "managerd peak RSS over its idle RSS (frontier memory)", m)
	per(func(r crawlb.Run) float64 { return float64(r.Farro.FrontierDisk) }, "frontier disk: crawls/NAME without bodies/ and gates/", m)
	per(func(r crawlb.Run) float64 { return float64(r.Farro.JobDisk) }, "URL job directories in the spool (until --retention)", m)
	per(func(r crawlb.Run) float64 { return float64(r.Farro.BodyDisk) }, "bodies/ (content-addressed; grows with content, not URLs)", m)
	tw.Flush()
	disc, _, _ := medianOf(fr, func(r crawlb.Run) float64 { return float64(r.Farro.Status.Discovered) })
	idle, _, _ := medianOf(fr, func(r crawlb.Run) float64 { return mib(r.Farro.MgrBaseKiB) })
	fmt.Fprintf(w, "  (%.0f URLs discovered; managerd idle RSS %.1f MiB. The linear extrapolation of memory is an upper bound: the seen-set's cache\n"+
		"  and journal are capped (docs/CRAWL.md \"Memory and disk\"), so RSS at 1M URLs was not measured here and may be lower.)\n", disc, idle)

	if prof != nil && prof.Farro != nil {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "4. Profile: one more farro crawl (--max-pages %d) under strace -f -c (slowed by strace: %.0f pages/s; not in the medians)\n", prof.Log.Pages, prof.Rate())
		pages := float64(max(prof.Log.Pages, 1))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tfsync+fdatasync+syncfs per page\tms in them per page\trename per page\tsyscalls per page\ttop syscalls by wall time, all threads (calls per page)\t")
		for _, d := range []string{"agentd", "managerd", "watchdogd"} {
			sc := crawlb.ParseStrace(prof.Farro.Strace[d])
			var top []string
			for i, s := range sc.ByTime() {
				if i == 5 {
					break
				}
				top = append(top, fmt.Sprintf("%s %.0f%% (%.1f)", s.Name, s.PctTime, float64(s.Calls)/pages))
			}
			syncs := float64(sc.Calls("fsync")+sc.Calls("fdatasync")+sc.Calls("syncfs")) / pages
			syncMs := 1000 * (sc.Secs("fsync") + sc.Secs("fdatasync") + sc.Secs("syncfs")) / pages
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.0f\t%s\t\n", d, syncs, syncMs,
				float64(sc.Calls("rename")+sc.Calls("renameat")+sc.Calls("renameat2"))/pages, float64(sc.Total())/pages, strings.Join(top, ", "))
		}
		tw.Flush()
		fmt.Fprintf(w, "  (wall time per page of this run: %.2f ms; strace -w times are wall-clock, summed over all threads)\n",
			float64(prof.Elapsed.Microseconds())/1000/pages)
	}

	if perfRun != nil && perfRun.Farro != nil {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "5. CPU profile: one more farro crawl (--max-pages %d) under perf record -F 997 -g (%.0f pages/s; not in the medians), its samples by binary (kernel or the daemon), then the daemon's own symbols over 2%% of its user-space samples\n", perfRun.Log.Pages, perfRun.Rate())
		for _, d := range []string{"agentd", "managerd"} {
			fmt.Fprintf(w, "  %s:\n", d)
			for _, line := range strings.Split(perfRun.Farro.Perf[d], "\n") {
				t := strings.TrimSpace(line)
				switch {
				case strings.HasSuffix(t, "own code:"):
					fmt.Fprintf(w, "   %s\n", strings.TrimPrefix(t, "# "))
				case t != "" && !strings.HasPrefix(t, "#"):
					fmt.Fprintf(w, "    %s\n", strings.Join(strings.Fields(t), " "))
				}
			}
		}
	}

	renderRealTree(w, real)

	fmt.Fprintln(w)
	fmt.Fprintln(w, "Goals, same run: MET, NOT MET, or NOT MEASURED (why)")
	rate := func(key string) float64 {
		for _, t := range tools {
			if t.key == key {
				med, _, _ := medianOf(t.runs, crawlb.Run.Rate)
				return med
			}
		}
		return 0
	}
	goal := func(label, value, target string, met bool) {
		s := "NOT MET"
		if met {
			s = "MET"
		}
		fmt.Fprintf(w, "  %-52s %12s  (goal %s)  %s\n", label, value, target, s)
	}
	notMeasured := func(label, target, why string) {
		fmt.Fprintf(w, "  %-52s %12s  (goal %s)  NOT MEASURED (%s)\n", label, "-", target, why)
	}
	fwget, fcolly, fcollyIdle := rate("farro")/rate("wget"), rate("farro")/rate("colly"), rate("farro")/rate("colly-idle")
	goal("pages/s farro / wget", fmt.Sprintf("%.2fx", fwget), ">= 1.0x", fwget >= 1)
	goal("pages/s farro / Colly P8", fmt.Sprintf("%.2fx", fcolly), ">= 0.5x", fcolly >= 0.5)
	goal("pages/s farro / Colly P8 with idle connections", fmt.Sprintf("%.2fx", fcollyIdle), ">= 0.5x", fcollyIdle >= 0.5)
	if real != nil {
		var farroRate, wgetRate float64
		for _, r := range real.Runs {
			switch r.Tool {
			case "farro":
				farroRate = r.Rate()
			case "wget":
				wgetRate = r.Rate()
			}
		}
		if farroRate > 0 && wgetRate > 0 {
			goal("pages/s farro / wget on the real tree", fmt.Sprintf("%.2fx", farroRate/wgetRate), ">= 1.0x", farroRate/wgetRate >= 1)
		}
	} else {
		notMeasured("pages/s farro / wget on the real tree", ">= 1.0x", "the real tree was not crawled")
	}
	cpuPage, _, _ := medianOf(fr, func(r crawlb.Run) float64 {
		var sum time.Duration
		for _, c := range r.Farro.CPU {
			sum += c
		}
		return float64(sum.Microseconds()) / 1000 / float64(max(r.Log.Pages, 1))
	})
	goal("farro CPU per page, the three daemons added up", fmt.Sprintf("%.2f ms", cpuPage), "<= 1 ms", cpuPage <= 1)
	inodes, _, _ := medianOf(fr, func(r crawlb.Run) float64 { return float64(r.Farro.SpoolInodes) / float64(max(r.Log.Pages, 1)) })
	goal("farro spool inodes per page once the crawl is done", fmt.Sprintf("%.1f", inodes), "<= 3", inodes <= 3)
	notMeasured("frontier at 100k domains and 1M URLs: managerd RSS", "<= 256 MiB", "not run here: this site has one domain and 10k URLs; in make bench-frontier's table (make bench runs it last)")
	notMeasured("frontier: a release pass costs O(domains ready now)", "not O(domains known)", "not run here: in make bench-frontier's table (make bench runs it last)")
	dups := 0
	for _, r := range fr {
		dups += r.Log.Duplicates
	}
	goal("farro duplicate fetches, all runs", fmt.Sprint(dups), "0", dups == 0)
	peak, _, _ := medianOf(fr, func(r crawlb.Run) float64 { return mib(r.PeakKiB) })
	goal("farro peak RSS, largest daemon", fmt.Sprintf("%.1f MiB", peak), "<= 64 MiB", peak <= 64)
	sum, _, _ := medianOf(fr, func(r crawlb.Run) float64 { return mib(r.SumKiB) })
	goal("farro peak RSS, the three daemons added up", fmt.Sprintf("%.1f MiB", sum), "<= 64 MiB", sum <= 64)

	fmt.Fprintln(w)
	fmt.Fprintln(w, "Notes")
	for _, n := range []string{
		"Every tool crawls the same site from /p/0.html on the same nginx, one after the other, in interleaved rounds. pages = distinct /p/ URLs answered 200; requests include robots.txt (wget and farro ask for it; it is a 404); duplicate fetches = requests of a /p/ URL beyond its first, per run, from nginx's access log (emptied between runs).",
		"wget: --recursive --level=inf, one connection, pages saved to disk. Colly: colly/v2 Async, LimitRule Parallelism as shown, OnHTML a[href] -> Visit, in-memory visited set, its own process. Clock: the process's start to its exit.",
		"farro: every URL is a durable job (default fsyncs). watchdogd, managerd (the frontier) and agentd are started and ready before the clock; the clock runs from `farroctl crawl start` (--delay 0 --jitter 0 --max-in-flight-per-domain 1000 --max-in-flight 1000 --allow-private --scope host --max-depth 1000) to the first `farroctl crawl status --json` (polled every 100 ms) that says done.",
		"Peak RSS: wget and Colly from wait4's ru_maxrss; farro's daemons from VmHWM just after the crawl, 'max' the largest daemon, 'sum' the three added up. CPU: utime+stime from /proc during the crawl.",
	} {
		fmt.Fprintf(w, "  - %s\n", n)
	}
	if len(fr) > 0 {
		if s := fr[0].Farro.Status; s.Fetched != int64(site.Pages) {
			fmt.Fprintf(w, "  - farro's own count: %d fetched, %d failed (site: %d pages)\n", s.Fetched, s.Failed, site.Pages)
		}
	}
	for _, t := range tools {
		for i, r := range t.runs {
			if r.Log.Pages != site.Pages {
				fmt.Fprintf(w, "  - %s run %d fetched %d of the %d pages\n", t.key, i+1, r.Log.Pages, site.Pages)
			}
		}
	}
}

func nginxVersion() string {
	out, err := exec.Command(realsite.NginxBin(), "-v").CombinedOutput()
	if err != nil {
		return "?"
	}
	s := strings.TrimSpace(string(out))
	if i := strings.Index(s, "nginx/"); i >= 0 {
		return s[i+len("nginx/"):]
	}
	return s
}

func describeCheckout(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return root
	}
	return root + " @ " + strings.TrimSpace(string(out))
}

// sampleLoad samples the 1-minute load average every 5 s until the
// returned function is called; it returns "min..max (median m)".
func sampleLoad() func() string {
	var mu sync.Mutex
	var xs []float64
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			if v, err := strconv.ParseFloat(strings.Fields(sys.LoadAvg() + " 0")[0], 64); err == nil {
				mu.Lock()
				xs = append(xs, v)
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() string {
		close(stop)
		mu.Lock()
		defer mu.Unlock()
		if len(xs) == 0 {
			return "?"
		}
		lo, hi := xs[0], xs[0]
		for _, x := range xs {
			lo, hi = min(lo, x), max(hi, x)
		}
		return fmt.Sprintf("%.1f..%.1f (median %.1f, sampled every 5 s)", lo, hi, stats.Median(xs))
	}
}

// renderRealTree prints the real-tree section: each tool against wget.
func renderRealTree(w io.Writer, rt *crawlb.RealTree) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "6. Real tree: the PostgreSQL documentation (Debian %s, %d HTML files), robots.txt \"Disallow: %s\", politeness off, one run each, compared with wget from nginx's log\n",
		realsite.Package, rt.Files, realsite.Disallowed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tpages/s\tseconds\tHTML pages\tonly this tool\tonly wget\tduplicate fetches\trobots.txt violations\t")
	for _, r := range rt.Runs {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%d\t%d\t%d\t%d\t%d\t\n", r.Label, r.Rate(), r.Elapsed.Seconds(), r.Report.Pages(),
			len(r.OnlyTool), len(r.OnlyWget), r.Report.Duplicates, len(r.Report.Forbidden))
	}
	tw.Flush()
	for _, r := range rt.Runs {
		if len(r.OnlyTool) > 0 || len(r.OnlyWget) > 0 {
			fmt.Fprintf(w, "  %s: only it %s; only wget %s\n", r.Tool, firstFew(r.OnlyTool, 8), firstFew(r.OnlyWget, 8))
		}
	}
	for _, r := range rt.Runs {
		if r.Tool != "farro" {
			continue
		}
		met := len(r.OnlyTool) == 0 && len(r.OnlyWget) == 0 && r.Report.Duplicates == 0 && len(r.Report.Forbidden) == 0
		s := "NOT MET"
		if met {
			s = "MET"
		}
		fmt.Fprintf(w, "  farro on the real tree: the same HTML set as wget, no duplicate, robots.txt obeyed: %s\n", s)
	}
}

func firstFew(xs []string, n int) string {
	if len(xs) == 0 {
		return "none"
	}
	if len(xs) <= n {
		return strings.Join(xs, " ")
	}
	return strings.Join(xs[:n], " ") + fmt.Sprintf(" ... (%d)", len(xs))
}
