package ctl

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/internal/tally"
	"github.com/farro-dev/farro/pkg/fsq"
)

// MetricsOptions are the metrics command's flags.
type MetricsOptions struct {
	// Textfile is a directory (node_exporter's --collector.textfile.directory)
	// to write farro.prom into, atomically; empty: print to stdout.
	Textfile string
	// Version is reported by farro_build_info.
	Version string
}

// Metrics lists the spool once and prints its figures in the Prometheus
// text format (the gauges managerd exports: farro_jobs{state},
// farro_oldest_queued_job_timestamp_seconds, locks, corrupt entries, and
// farro_build_info), or writes them to TEXTFILE/farro.prom. Unlike a
// scrape of managerd this walks the spool: run it from a timer, not in a
// tight loop, on a very large spool.
func (c *Ctl) Metrics(o MetricsOptions) error {
	if c.OnStore() {
		return c.storeMetrics(o)
	}
	s, err := c.existing()
	if err != nil {
		return err
	}
	if err := checkTextfile(o.Textfile); err != nil {
		return err
	}
	v := spoolview.New(s, spoolview.Config{})
	if err := v.Scan(); err != nil {
		return err
	}
	// The text is made here, not by the Prometheus client: farroctl
	// links no Prometheus code (internal/tally).
	return c.writeMetrics(o, tally.SpoolText("farroctl", o.Version, v.Snapshot()))
}

// checkTextfile checks --textfile: empty, or a directory.
func checkTextfile(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("--textfile: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("--textfile %s is not a directory", dir)
	}
	return nil
}

// writeMetrics prints text, or writes it to TEXTFILE/farro.prom.
func (c *Ctl) writeMetrics(o MetricsOptions, text []byte) error {
	if o.Textfile != "" {
		// Atomically and durably (a temp file beside it, a dot file
		// node_exporter ignores, renamed over it): a scrape never reads
		// half a file.
		if err := fsq.WriteFile(filepath.Join(o.Textfile, tally.TextfileName), text, fsq.WithPerm(0o644)); err != nil {
			return fmt.Errorf("textfile: %w", err)
		}
		return nil
	}
	_, err := c.Stdout.Write(text)
	return err
}
