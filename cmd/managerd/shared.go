package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/manager"
	"github.com/farro-dev/farro/internal/metrics"
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/internal/spoolview"
	"github.com/farro-dev/farro/internal/tally"
)

// runShared is managerd on a PostgreSQL store (--store URL): the retry
// policy, the promotion of deferred jobs and retention, on the database
// (manager.Shared). The crawl frontier stays on a spool: it does not run
// here, whatever --frontier says (one log line says so), nor do the
// spool's tmp/ sweep and event segments. Several managerd on several
// hosts may run on one database: every move is checked in its
// transaction, so a job is moved once.
func runShared(c *cli.Context, stdout io.Writer, cfg manager.Config) error {
	if daemon.CheckOnly(c) {
		if err := daemon.CheckShared(c.Context, c); err != nil {
			return err
		}
		return daemon.ConfigOK(c)
	}
	log := logx.New(stdout, manager.Actor, c.String("log-level"))
	sh, err := daemon.OpenSharedDaemon(c, log, "managerd", registry.Options{Actor: manager.Actor, Version: daemon.Version, MaxAttempts: cfg.MaxAttempts})
	if err != nil {
		return err
	}
	defer sh.Close()
	return daemon.Serve(c.Context, log, "managerd", func(ctx context.Context) error {
		log.Info().Bool("frontier", false).Msg("the crawl frontier runs on a spool only: not on a PostgreSQL store (--frontier=false implied)")
		cfg.Ready = func() { daemon.Ready(ctx, nil) }
		m := manager.NewShared(sh.Store, cfg, log)
		if daemon.MetricsEnabled(c) { // the queue's figures: farro_jobs{state} and co., from the database
			mdone := make(chan struct{})
			go func() {
				defer close(mdone)
				metrics.FollowStore(ctx, func(ctx context.Context) (spoolview.Snapshot, error) {
					g, err := sh.Store.Gauges(ctx)
					return tally.StoreSnapshot(g), err
				}, c.Duration(daemon.MetricsRescanFlag.Name), func(err error) { log.Warn().Err(err).Msg("metrics: the queue's figures cannot be read") })
			}()
			defer func() { <-mdone }()
		}
		log.Info().Str("store", "postgres").Str("local", sh.Local.Root).Int("max_attempts", cfg.MaxAttempts).
			Dur("backoff_base_ms", cfg.BackoffBase).Dur("backoff_max_ms", cfg.BackoffMax).
			Dur("retention_ms", cfg.Retention).Dur("pass_ms", manager.SharedEvery).Msg("managerd starting")
		return m.Run(ctx)
	})
}
