package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// PipelineOptions are the flags of farroctl pipeline run|check|acquire.
type PipelineOptions struct {
	Mode              pipeline.Mode
	DryRun            bool
	MaxSources        int
	MaxPerDomain      int
	MinDomainInterval time.Duration
	// MaxDomainRequests and MaxRequests: the run's request caps (one
	// domain, in all), checks and acquisitions together (0: no cap).
	MaxDomainRequests int
	MaxRequests       int
	RefreshInterval   time.Duration
	MaxRefresh        int
	JSON              bool
	// LogJSON prints the report as log lines in the daemons' format
	// (one per check, acquisition, refresh, and a summary), for the
	// journal; see logReport.
	LogJSON bool
}

// Pipeline does one pipeline run (docs/PIPELINE.md) and prints its
// report. With --dry-run it prints the plan and writes nothing.
func (c *Ctl) Pipeline(o PipelineOptions) error {
	if o.MaxSources < 0 || o.MaxPerDomain < 0 || o.MinDomainInterval < 0 || o.RefreshInterval < 0 || o.MaxRefresh < 0 ||
		o.MaxDomainRequests < 0 || o.MaxRequests < 0 {
		return Usagef("pipeline %s: limits and intervals must not be negative", o.Mode)
	}
	if o.JSON && o.LogJSON {
		return Usagef("pipeline %s: --json and --log-json exclude each other", o.Mode)
	}
	rep, err := c.pipelineRun(o)
	if err != nil {
		if o.LogJSON {
			logRunError(c.Stdout, o.Mode, err)
			return silent("pipeline %s: %v", o.Mode, err)
		}
		return err
	}
	switch {
	case o.LogJSON:
		logReport(c.Stdout, rep)
	case o.JSON:
		b, _ := json.Marshal(rep)
		fmt.Fprintf(c.Stdout, "%s\n", b)
	default:
		printReport(c.Stdout, rep)
	}
	if !o.LogJSON {
		for _, p := range rep.Problems {
			c.warnf("%s: %s", p.File, p.Error)
		}
	}
	if rep.Errors > 0 || len(rep.Problems) > 0 {
		return silent("pipeline %s: %d errors, %d unreadable source files", o.Mode, rep.Errors, len(rep.Problems))
	}
	return nil
}

func (c *Ctl) pipelineRun(o PipelineOptions) (*pipeline.Report, error) {
	var sp *job.Spool
	var err error
	if o.DryRun {
		sp, err = c.existing()
	} else {
		sp, err = c.open()
	}
	if err != nil {
		return nil, err
	}
	return pipeline.Run(sp, pipeline.RunOptions{
		Mode: o.Mode, DryRun: o.DryRun, RefreshInterval: o.RefreshInterval, MaxRefresh: o.MaxRefresh, Now: c.now(), Jobs: spoolstore.New(sp),
		Politeness: pipeline.Politeness{MaxSources: o.MaxSources, MaxPerDomain: o.MaxPerDomain, MinDomainInterval: o.MinDomainInterval,
			MaxDomainRequests: o.MaxDomainRequests, MaxRequests: o.MaxRequests},
	})
}

func printReport(w io.Writer, rep *pipeline.Report) {
	verb := "pipeline " + string(rep.Mode)
	if rep.DryRun {
		verb += " (dry run: nothing written)"
	}
	fmt.Fprintf(w, "%s at %s\n", verb, rep.At.Format(time.RFC3339))
	if rep.Mode != pipeline.ModeAcquire {
		fmt.Fprintf(w, "\nchecks (%d; %d due sources left for the next run, %d not due):\n", len(rep.Checks), len(rep.Left), rep.NotDue)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tSOURCE\tDOMAIN\tNOT BEFORE\tJOB\tSTATUS")
		for i, e := range rep.Checks {
			st := e.Status
			if e.Error != "" {
				st += ": " + e.Error
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t+%s\t%s\t%s\n", i+1, e.Source, e.Domain, e.NotBefore.Sub(rep.At).Round(time.Millisecond), e.JobID, st)
		}
		_ = tw.Flush()
		if len(rep.Left) > 0 {
			var names []string
			for _, l := range rep.Left {
				names = append(names, l.Source)
			}
			fmt.Fprintf(w, "left for the next run, in order: %s\n", strings.Join(names, ", "))
		}
	}
	if rep.Mode != pipeline.ModeCheck {
		fmt.Fprintf(w, "\nacquisitions of pending sources (%d):\n", len(rep.Acquire))
		for _, a := range rep.Acquire {
			line := fmt.Sprintf("  %s -> crawl %s: %s", a.Source, a.Crawl, a.Status)
			if a.Result != nil && a.Result.Action != "" {
				line += " (" + a.Result.Action + ")"
			}
			if b := a.Budget; b != nil {
				line += fmt.Sprintf(" [budget %s pages, %s per domain, %s apart]", capText(b.MaxPages), capText(b.MaxPagesPerDomain), b.Interval.D())
			}
			if a.Error != "" {
				line += ": " + a.Error
			} else if a.Result != nil && a.Result.Deferred != "" {
				line += ": " + a.Result.Deferred
			}
			fmt.Fprintln(w, line)
		}
		fmt.Fprintf(w, "\ndomain refresh (%d due):\n", len(rep.Refresh))
		for _, r := range rep.Refresh {
			line := fmt.Sprintf("  %s %s: %s (yield %.2f, last crawled %s, score %d)", r.Crawl, r.Domain, r.Status, r.YieldRate, r.LastCrawledAt.UTC().Format("2006-01-02 15:04"), r.Score)
			if r.Error != "" {
				line += ": " + r.Error
			} else if r.Deferred != "" {
				line += ": " + r.Deferred
			}
			fmt.Fprintln(w, line)
		}
	}
}

// capText prints a cap (0: none).
func capText(n int64) string {
	if n <= 0 {
		return "no cap on"
	}
	return fmt.Sprint(n)
}

// SourceStatus is one row of pipeline status.
type SourceStatus struct {
	*source.Source
	State      string      `json:"state"`
	CrawlState crawl.State `json:"crawl_state,omitempty"`
	// CheckJob is the job checking a due source (state "checking ...").
	CheckJob *CheckJob `json:"check_job,omitempty"`
}

// PipelineStatus shows every source's state and schedule, and the
// domains due for a refresh.
func (c *Ctl) PipelineStatus(refreshInterval time.Duration, jsonOut bool) error {
	sp, err := c.existing()
	if err != nil {
		return err
	}
	srcs, probs, err := source.List(sp)
	if err != nil {
		return err
	}
	now := c.now()
	rows := make([]SourceStatus, 0, len(srcs))
	for _, s := range srcs {
		r := SourceStatus{Source: s}
		r.State, r.CheckJob = sourceStateWithJob(sp, s, now)
		if st, err := crawl.Open(sp, s.Crawl); err == nil && st.Exists() {
			if cr, err := st.Load(); err == nil {
				r.CrawlState = cr.State
			}
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].NextCheckAfter, rows[j].NextCheckAfter
		switch {
		case a == nil && b != nil:
			return true
		case a != nil && b == nil:
			return false
		case a != nil && !a.Equal(*b):
			return a.Before(*b)
		}
		return rows[i].Name < rows[j].Name
	})
	rep, err := pipeline.Run(sp, pipeline.RunOptions{Mode: pipeline.ModeAcquire, DryRun: true, RefreshInterval: refreshInterval, Now: now})
	if err != nil {
		return err
	}
	if jsonOut {
		b, _ := json.Marshal(struct {
			At      time.Time               `json:"at"`
			Sources []SourceStatus          `json:"sources"`
			Refresh []pipeline.RefreshEntry `json:"refresh_due"`
		}{now, rows, rep.Refresh})
		fmt.Fprintf(c.Stdout, "%s\n", b)
	} else {
		tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SOURCE\tSTATE\tDOMAIN\tNEXT CHECK\tLAST OUTCOME\tFAILS\tLAST CHANGED\tLAST ACQUIRED\tCRAWL")
		for _, r := range rows {
			cs := "-"
			if r.CrawlState != "" {
				cs = r.Crawl + " (" + string(r.CrawlState) + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Name, stateText(r.State, r.CheckJob), r.Domain, fmtNext(r.NextCheckAfter, now),
				dash(string(r.LastOutcome)), r.ConsecutiveFailures, fmtTime(r.LastChangedAt), fmtTime(r.LastAcquiredAt), cs)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(c.Stdout, "\n%d domains due for a refresh (interval %s)\n", len(rep.Refresh), refreshInterval)
		for _, r := range rep.Refresh {
			fmt.Fprintf(c.Stdout, "  %s %s (yield %.2f, last crawled %s)\n", r.Crawl, r.Domain, r.YieldRate, r.LastCrawledAt.UTC().Format("2006-01-02 15:04"))
		}
	}
	for _, p := range probs {
		c.warnf("%s: %s", p.File, p.Error)
	}
	if len(probs) > 0 {
		return silent("%d unreadable source files", len(probs))
	}
	return nil
}
