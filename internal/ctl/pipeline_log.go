package ctl

import (
	"io"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/pipeline"
)

// PipelineLogActor is the actor of pipeline run --log-json's lines (the
// actor its check jobs are submitted as).
const PipelineLogActor = Actor + "/" + pipeline.Actor

// logReport writes a pipeline report as log lines in the daemons' format
// (internal/logx: timestamp, level, app, actor, message, then the
// fields, each key once): one line per check, source left for the next
// run, acquisition, domain refresh and unreadable source file, then one
// summary line. Lines about an error are at level error, unreadable
// files and left sources at warn, the rest at info. When w is the
// journal's stream each line carries its syslog priority.
func logReport(w io.Writer, rep *pipeline.Report) {
	log := logx.New(w, PipelineLogActor, "info")
	mode := string(rep.Mode)
	for _, e := range rep.Checks {
		ev := log.Info()
		if e.Error != "" {
			ev = log.Error().Str("error", e.Error)
		}
		ev = ev.Str("mode", mode).Bool("dry_run", rep.DryRun).Str("source", e.Source).Str("domain", e.Domain).Str("url", e.URL).
			Str("job_id", e.JobID).Str("status", e.Status).Int("slot", e.Slot).Time("not_before", e.NotBefore).
			Int64("delay_ms", e.NotBefore.Sub(rep.At).Milliseconds())
		if e.NextCheckAfter != nil {
			ev = ev.Time("due_at", *e.NextCheckAfter)
		}
		ev.Msg("source check")
	}
	for _, l := range rep.Left {
		ev := log.Warn().Str("mode", mode).Str("source", l.Source).Str("domain", l.Domain)
		if l.NextCheckAfter != nil {
			ev = ev.Time("due_at", *l.NextCheckAfter)
		}
		ev.Msg("source due, left for the next run")
	}
	for _, a := range rep.Acquire {
		ev := log.Info()
		if a.Error != "" {
			ev = log.Error().Str("error", a.Error)
		}
		ev = ev.Str("mode", mode).Bool("dry_run", rep.DryRun).Str("source", a.Source).Str("crawl", a.Crawl).Str("status", a.Status)
		if a.Result != nil && a.Result.Action != "" {
			ev = ev.Str("action", a.Result.Action)
		}
		ev.Msg("source acquisition")
	}
	for _, r := range rep.Refresh {
		ev := log.Info()
		if r.Error != "" {
			ev = log.Error().Str("error", r.Error)
		}
		ev = ev.Str("mode", mode).Bool("dry_run", rep.DryRun).Str("crawl", r.Crawl).Str("domain", r.Domain).Str("status", r.Status).
			Float64("yield_rate", r.YieldRate).Int("score", r.Score)
		if !r.LastCrawledAt.IsZero() {
			ev = ev.Time("last_crawled_at", r.LastCrawledAt)
		}
		ev.Msg("domain refresh")
	}
	for _, p := range rep.Problems {
		log.Warn().Str("mode", mode).Str("file", p.File).Str("error", p.Error).Msg("unreadable source file")
	}
	lvl := zerolog.InfoLevel
	if rep.Errors > 0 || len(rep.Problems) > 0 {
		lvl = zerolog.ErrorLevel
	}
	log.WithLevel(lvl).Str("mode", mode).Bool("dry_run", rep.DryRun).Time("at", rep.At).
		Int("checks", len(rep.Checks)).Int("left", len(rep.Left)).Int("not_due", rep.NotDue).
		Int("acquisitions", len(rep.Acquire)).Int("refreshes", len(rep.Refresh)).
		Int("errors", rep.Errors).Int("unreadable_sources", len(rep.Problems)).Int64("duration_ms", rep.DurationMS).
		Msg("pipeline " + mode + " done")
}

// logRunError writes the error that stopped a run before it had a report,
// as one log line.
func logRunError(w io.Writer, mode pipeline.Mode, err error) {
	log := logx.New(w, PipelineLogActor, "info")
	log.Error().Str("mode", string(mode)).Err(err).Msg("pipeline " + string(mode) + " failed")
}
