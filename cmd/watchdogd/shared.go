package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/internal/watchdog"
)

// runShared is watchdogd on a PostgreSQL store (--store URL): one per
// host (the registry lock under the local --spool), recovering expired
// leases every --interval and stopping this host's handlers whose claim
// is no longer current (see watchdog.RunShared). --crash-threshold,
// --lock-grace, --rescan and --no-notify are the spool's.
func runShared(c *cli.Context, stdout io.Writer) error {
	if daemon.CheckOnly(c) {
		if err := daemon.CheckShared(c.Context, c); err != nil {
			return err
		}
		return daemon.ConfigOK(c)
	}
	log := logx.New(stdout, watchdog.Actor, c.String("log-level"))
	sh, err := daemon.OpenSharedDaemon(c, log, "watchdogd", registry.Options{Actor: watchdog.Actor, Version: daemon.Version})
	if err != nil {
		return err
	}
	defer sh.Close()
	return daemon.Serve(c.Context, log, "watchdogd", func(ctx context.Context) error {
		log.Info().Str("store", "postgres").Str("local", sh.Local.Root).Dur("interval_ms", c.Duration("interval")).
			Dur("lease_grace_ms", c.Duration("lease-grace")).
			Dur("scratch_retention_ms", c.Duration("scratch-retention")).Msg("watchdogd starting")
		return watchdog.RunShared(ctx, watchdog.SharedConfig{
			Store: sh.Store, Local: sh.Local.Root, Interval: c.Duration("interval"), Grace: c.Duration("lease-grace"),
			ScratchRetention: c.Duration("scratch-retention"),
			Ready:            func() { daemon.Ready(ctx, nil) }, Log: log,
		})
	})
}
