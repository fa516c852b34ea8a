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
	local, st, err := daemon.OpenShared(c.Context, c, 0, logx.StreamWarn(log))
	if err != nil {
		if !daemon.IsConfigError(err) {
			log.Error().Err(err).Msg("cannot open the store")
		}
		return err
	}
	defer st.Close()
	reg, err := registry.AcquireDaemon(local, "watchdogd", registry.Options{Actor: watchdog.Actor, Version: daemon.Version})
	if err != nil {
		return err
	}
	defer reg.Release()
	return daemon.Serve(c.Context, log, "watchdogd", func(ctx context.Context) error {
		log.Info().Str("store", "postgres").Str("local", local.Root).Dur("interval_ms", c.Duration("interval")).
			Dur("lease_grace_ms", c.Duration("lease-grace")).Msg("watchdogd starting")
		return watchdog.RunShared(ctx, watchdog.SharedConfig{
			Store: st, Local: local.Root, Interval: c.Duration("interval"), Grace: c.Duration("lease-grace"),
			Ready: func() { daemon.Ready(ctx, nil) }, Log: log,
		})
	})
}
