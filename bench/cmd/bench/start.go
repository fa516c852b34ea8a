package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/bench/internal/farrob"
	"github.com/farro-dev/farro/bench/internal/report"
	"github.com/farro-dev/farro/bench/internal/stats"
)

// measureStart times `farroctl --version` against a minimal Go binary
// (built into the work dir by the same go command), the same number of
// runs, interleaved: the process start a per-process submit pays.
func measureStart(cfg config, r *report.Report, bins farrob.Bins, c column) error {
	col := c.key
	hello := filepath.Join(bins.Dir, "hello")
	if _, err := os.Stat(hello); err != nil {
		if hello, err = farrob.BuildHello(bins.Dir); err != nil {
			return err
		}
	}
	p, err := farrob.StartCompare([]string{bins.Path("farroctl"), "--version"}, []string{hello}, cfg.startN)
	if err != nil {
		return err
	}
	if p.BOut != farrob.HelloOutput {
		return fmt.Errorf("%s printed %q, want %q", hello, p.BOut, farrob.HelloOutput)
	}
	ins := r.Section(secInsert)
	fa, he := p.PerRunA(), p.PerRunB()
	cell := func(d time.Duration) string { return fmt.Sprintf("%.0f (%.2f ms)", 1/d.Seconds(), stats.Ms(d)) }
	ins.Set("ins-start", "  farroctl --version, the process start alone (runs/s (ms per run))", col, cell(fa), 1/fa.Seconds())
	ins.Set("ins-hello", fmt.Sprintf("  minimal Go binary (hello world), %d runs each, interleaved with the row above", cfg.startN), col, cell(he), 1/he.Seconds())
	r.SetNum("ins-start-ms", col, stats.Ms(fa))
	r.SetNum("ins-hello-ms", col, stats.Ms(he))
	logf("%s: farroctl --version %.2f ms per run, minimal Go binary %.2f ms (%d runs each, interleaved)", col, stats.Ms(fa), stats.Ms(he), cfg.startN)
	return nil
}
