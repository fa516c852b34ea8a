package ctl

import (
	"fmt"
	"os"

	"github.com/farro-dev/farro/internal/metrics"
	"github.com/farro-dev/farro/internal/spoolview"
)

// MetricsOptions are the metrics command's flags.
type MetricsOptions struct {
	// Textfile is a directory (node_exporter's --collector.textfile.directory)
	// to write farro.prom into, atomically; empty: print to stdout.
	Textfile string
}

// Metrics lists the spool once and prints its figures in the Prometheus
// text format (the gauges managerd exports: farro_jobs{state},
// farro_oldest_queued_job_timestamp_seconds, locks, corrupt entries, and
// farro_build_info), or writes them to TEXTFILE/farro.prom. Unlike a
// scrape of managerd this walks the spool: run it from a timer, not in a
// tight loop, on a very large spool.
func (c *Ctl) Metrics(o MetricsOptions) error {
	s, err := c.existing()
	if err != nil {
		return err
	}
	if o.Textfile != "" {
		fi, err := os.Stat(o.Textfile)
		if err != nil {
			return fmt.Errorf("--textfile: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("--textfile %s is not a directory", o.Textfile)
		}
	}
	v := spoolview.New(s, spoolview.Config{})
	if err := v.Scan(); err != nil {
		return err
	}
	reg := metrics.SpoolRegistry(metrics.Farroctl, v)
	if o.Textfile != "" {
		_, err := metrics.WriteTextfile(o.Textfile, reg)
		return err
	}
	text, err := metrics.Text(reg)
	if err != nil {
		return err
	}
	_, err = c.Stdout.Write(text)
	return err
}
