// Command managerd is farro's manager daemon: it retries failed jobs after
// an exponential backoff with jitter (through deferred/), requeues stale
// jobs, kills jobs out of attempts, promotes due deferred jobs to incoming/,
// sweeps tmp/ and applies the retention of terminal jobs.
package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/frontier"
	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/manager"
	"github.com/farro-dev/farro/internal/metrics"
	_ "github.com/farro-dev/farro/internal/metricsd" // --metrics-addr serves internal/metrics
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

func main() {
	daemon.Exit("managerd", daemon.Run(newApp(os.Stdout, os.Stderr), os.Args))
}

// newApp builds the command; logs and help go to stdout, usage errors to
// stderr.
func newApp(stdout, stderr io.Writer) *cli.App {
	app := daemon.App("managerd", "farro manager daemon: retry policy, deferred jobs, tmp sweep, retention", []cli.Flag{
		&cli.IntFlag{Name: "max-attempts", Value: 3, EnvVars: []string{"FARRO_MAX_ATTEMPTS"}, Usage: "attempts of a job whose own max_attempts is 0"},
		&cli.DurationFlag{Name: "backoff-base", Value: time.Second, EnvVars: []string{"FARRO_BACKOFF_BASE"}, Usage: "retry backoff cap after the first failure (doubles per attempt; full jitter)"},
		&cli.DurationFlag{Name: "backoff-max", Value: 5 * time.Minute, EnvVars: []string{"FARRO_BACKOFF_MAX"}, Usage: "largest retry backoff cap"},
		&cli.DurationFlag{Name: "retention", Value: 0, EnvVars: []string{"FARRO_RETENTION"}, Usage: "remove succeeded and killed jobs finished longer ago than this (0: keep forever)"},
		&cli.DurationFlag{Name: "events-retention", Value: manager.DefaultEventsRetention, EnvVars: []string{"FARRO_EVENTS_RETENTION"}, Usage: "remove event stream segments (events/*.jsonl) older than this (0: keep forever)"},
		&cli.DurationFlag{Name: "tmp-max-age", Value: time.Hour, EnvVars: []string{"FARRO_TMP_MAX_AGE"}, Usage: "remove tmp/ leftovers older than this"},
		&cli.DurationFlag{Name: "rescan", Value: 10 * time.Second, EnvVars: []string{"FARRO_RESCAN"}, Usage: "full rescan period (fsnotify backup; positive)"},
		&cli.BoolFlag{Name: "no-notify", EnvVars: []string{"FARRO_NO_NOTIFY"}, Usage: "disable fsnotify; rely on rescans"},
		daemon.MetricsRescanFlag,
		&cli.BoolFlag{Name: "frontier", Value: true, EnvVars: []string{"FARRO_FRONTIER"}, Usage: "run the crawl frontier (--frontier=false: leave crawls to another managerd)"},
		&cli.IntFlag{Name: "domain-cache", Value: frontier.DefaultDomainCache, EnvVars: []string{"FARRO_DOMAIN_CACHE"}, Usage: "domain entities each crawl keeps in memory (the others are read from disk when needed)"},
	}, func(c *cli.Context) error { return run(c, stdout) })
	app.Writer, app.ErrWriter = stdout, stderr
	daemon.SetValidator(app, validate)
	return app
}

func run(c *cli.Context, stdout io.Writer) error {
	cfg := manager.Config{
		MaxAttempts: c.Int("max-attempts"),
		BackoffBase: c.Duration("backoff-base"), BackoffMax: c.Duration("backoff-max"),
		Retention: c.Duration("retention"), TmpMaxAge: c.Duration("tmp-max-age"),
		EventsRetention: c.Duration("events-retention"),
		Rescan:          c.Duration("rescan"), NoNotify: c.Bool("no-notify"),
	}
	if daemon.StoreURL(c) != "" {
		return runShared(c, stdout, cfg)
	}
	if daemon.CheckOnly(c) {
		if err := daemon.CheckSpool(c.String("spool")); err != nil {
			return err
		}
		return daemon.ConfigOK(c)
	}
	log := logx.New(stdout, manager.Actor, c.String("log-level"))
	spool, err := daemon.OpenSpool(c.String("spool"), logx.StreamWarn(log))
	if err != nil {
		if !daemon.IsConfigError(err) { // a configuration error is one line on stderr only
			log.Error().Err(err).Msg("cannot open spool")
		}
		return err
	}
	// One managerd per spool: refused (exit registry.ExitAlreadyRunning)
	// while another holds agents/daemons/managerd.lock.
	reg, err := registry.AcquireDaemon(spool, "managerd", registry.Options{Actor: manager.Actor, Version: daemon.Version, MaxAttempts: cfg.MaxAttempts})
	if err != nil {
		return err
	}
	defer reg.Release()
	jobs := spoolstore.New(spool) // managerd's door to the spool's jobs
	var subs *manager.SubmissionTail
	if daemon.MetricsEnabled(c) {
		if subs, err = manager.NewSubmissionTail(jobs, nil); err != nil {
			log.Error().Err(err).Msg("cannot read the event stream")
			return err
		}
	}
	return daemon.Serve(c.Context, log, "managerd", func(ctx context.Context) error {
		var m *manager.Manager
		cfg.Ready = func() { daemon.Ready(ctx, m.Alive) }
		m = manager.New(jobs, cfg, log)
		if daemon.MetricsEnabled(c) { // the spool's figures: farro_jobs{state} and co.
			vdone := make(chan error, 1)
			go func() {
				vdone <- metrics.FollowSpool(ctx, spool, c.Duration(daemon.MetricsRescanFlag.Name), cfg.NoNotify,
					func(err error) { log.Warn().Err(err).Msg("metrics spool view") })
			}()
			defer func() { <-vdone }()
			// farro_submitted_total: submissions read from the event stream,
			// from where it ended before the endpoint answered.
			sdone := make(chan struct{})
			go func() {
				defer close(sdone)
				var last string // one line per distinct error, not one a second
				subs.Run(ctx, time.Second, func(err error) {
					if err.Error() != last {
						last = err.Error()
						log.Warn().Err(err).Msg("metrics submissions: an event stream segment cannot be read")
					}
				})
			}()
			defer func() { <-sdone }()
		}
		var fdone chan error
		if c.Bool("frontier") {
			fr := frontier.New(frontier.Config{Spool: spool, Store: jobs, Log: log.With().Str("component", "frontier").Logger(), Rescan: cfg.Rescan, NoNotify: cfg.NoNotify,
				DomainCache: c.Int("domain-cache")})
			metrics.SetCrawlDomains(fr.DomainCounts)
			metrics.SetCrawlPending(fr.PendingURLs)
			fdone = make(chan error, 1)
			go func() { fdone <- fr.Run(ctx) }()
			defer func() {
				if err := <-fdone; err != nil {
					log.Error().Err(err).Msg("frontier stopped")
				}
			}()
		}
		log.Info().Str("spool", spool.Root).Int("max_attempts", cfg.MaxAttempts).
			Dur("backoff_base_ms", cfg.BackoffBase).Dur("backoff_max_ms", cfg.BackoffMax).
			Dur("retention_ms", cfg.Retention).Dur("events_retention_ms", cfg.EventsRetention).Dur("tmp_max_age_ms", cfg.TmpMaxAge).
			Dur("rescan_ms", cfg.Rescan).Bool("no_notify", cfg.NoNotify).Msg("managerd starting")
		return m.Run(ctx)
	})
}

// validate is managerd's configuration check (daemon.SetValidator):
// at least one attempt, a positive backoff base no larger than the
// backoff maximum, retentions (jobs, event segments) that are not
// negative (0: keep forever),
// and a positive tmp/ age, rescan period and metrics relisting period.
func validate(c *cli.Context) error {
	if err := daemon.First(
		daemon.AtLeast(c, "max-attempts", 1),
		daemon.Positive(c, "backoff-base"),
		daemon.Positive(c, "backoff-max"),
	); err != nil {
		return err
	}
	if c.Duration("backoff-max") < c.Duration("backoff-base") {
		return daemon.Configf("%s must not be below %s",
			daemon.RefValue(c, "backoff-max", c.Duration("backoff-max").String()),
			daemon.RefValue(c, "backoff-base", c.Duration("backoff-base").String()))
	}
	return daemon.First(
		daemon.NotNegative(c, "retention"),
		daemon.NotNegative(c, "events-retention"),
		daemon.Positive(c, "tmp-max-age"),
		daemon.Positive(c, "rescan"),
		daemon.Positive(c, daemon.MetricsRescanFlag.Name),
		daemon.AtLeast(c, "domain-cache", 1),
	)
}
