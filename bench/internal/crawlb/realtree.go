package crawlb

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/bench/internal/farrob"
	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/realsite"
)

// The real tree: a documentation tree nobody here wrote (Debian's
// postgresql-doc-15, internal/realsite) served by a private nginx with a
// robots.txt that disallows its tutorial, crawled by wget, farro and
// Colly, each compared with wget from nginx's access log (the same
// comparison as test/crawl's TestCrawlRealSite).

// EnsureRealTree installs the tree from Debian's packages when it is
// missing.
func EnsureRealTree(logf func(string, ...any)) error {
	if _, err := os.Stat(filepath.Join(realsite.DocRoot, "index.html")); err == nil {
		return nil
	}
	if err := sys.AptInstall(logf, realsite.Package); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(realsite.DocRoot, "index.html")); err != nil {
		return fmt.Errorf("%s installed but %s is missing", realsite.Package, realsite.DocRoot)
	}
	return nil
}

// RealRun is one tool's crawl of the real tree.
type RealRun struct {
	Tool, Label string
	Elapsed     time.Duration
	Report      *realsite.Report
	// OnlyTool and OnlyWget are the HTML pages only this tool, and only
	// wget, fetched.
	OnlyTool, OnlyWget []string
}

// Rate is distinct HTML pages per second.
func (r *RealRun) Rate() float64 { return float64(r.Report.Pages()) / r.Elapsed.Seconds() }

// RealTree is the real-tree section's figures.
type RealTree struct {
	Files int // HTML files in the tree
	Runs  []*RealRun
}

// RealTreeConfig is what RealTree needs.
type RealTreeConfig struct {
	Work, LogDir string
	Bins         farrob.Bins
	CollyBin     string // "" to leave Colly out
	Parallel     int    // Colly's
	Concurrency  int    // farro's agentd
	Timeout      time.Duration
	Keep         bool
}

// RunRealTree serves the tree and crawls it once with each tool.
func RunRealTree(c RealTreeConfig, logf func(string, ...any)) (*RealTree, error) {
	files, _ := filepath.Glob(filepath.Join(realsite.DocRoot, "*.html"))
	ng, err := realsite.Start(filepath.Join(c.Work, "nginx-real"), realsite.DocRoot)
	if err != nil {
		return nil, err
	}
	defer ng.Stop()
	logf("real tree %s (%d HTML files) on 127.0.0.1:%d, robots.txt disallows %s", realsite.DocRoot, len(files), ng.Port, realsite.Disallowed)
	rt := &RealTree{Files: len(files)}
	seen := 0 // access-log lines of earlier runs
	take := func() ([]realsite.Request, error) {
		log, err := ng.Log()
		if err != nil {
			return nil, err
		}
		out := log[min(seen, len(log)):]
		seen = len(log)
		return out, nil
	}
	type spec struct {
		key, label, ua string
		run            func() (time.Duration, error)
	}
	specs := []spec{
		{"wget", "wget --recursive --level=inf", realsite.WgetUA, func() (time.Duration, error) {
			return realsite.Wget(ng, c.Work, filepath.Join(c.LogDir, fmt.Sprintf("wget-real-%d.log", time.Now().UnixNano())), c.Timeout)
		}},
		{"farro", fmt.Sprintf("farro: agentd --concurrency %d", c.Concurrency), crawl.DefaultUserAgent, func() (time.Duration, error) {
			r, err := Farro(FarroConfig{Bins: c.Bins, Dir: filepath.Join(c.Work, "farro-real"), LogDir: c.LogDir,
				Concurrency: c.Concurrency, Seed: ng.URL(realsite.Seed), Timeout: c.Timeout, Keep: c.Keep})
			return r.Elapsed, err
		}},
	}
	if c.CollyBin != "" {
		specs = append(specs, spec{"colly", fmt.Sprintf("Colly, Parallelism %d (robots.txt ignored: Colly's default)", c.Parallel), "colly", func() (time.Duration, error) {
			r, err := Colly(c.CollyBin, ng.URL(realsite.Seed), c.Parallel, 0, c.LogDir, c.Timeout)
			return r.Elapsed, err
		}})
	}
	var wget *realsite.Report
	for _, s := range specs {
		el, err := s.run()
		if err != nil {
			return nil, fmt.Errorf("real tree, %s: %w", s.key, err)
		}
		log, err := take()
		if err != nil {
			return nil, err
		}
		r := &RealRun{Tool: s.key, Label: s.label, Elapsed: el, Report: realsite.Analyze(log, s.ua)}
		if wget == nil {
			wget = r.Report
		}
		r.OnlyTool, r.OnlyWget = realsite.Diff(r.Report, wget)
		rt.Runs = append(rt.Runs, r)
		logf("real tree %-6s %6.0f pages/s: %d HTML pages in %s, %d requests, %d duplicates, %d robots.txt violations, %d/%d pages only it/only wget",
			s.key, r.Rate(), r.Report.Pages(), el.Round(time.Millisecond), r.Report.Requests, r.Report.Duplicates, len(r.Report.Forbidden),
			len(r.OnlyTool), len(r.OnlyWget))
	}
	return rt, nil
}
