// Command watchdogd is farro's recovery daemon: it finds claim locks whose
// holder died or went silent, rolls their half-done transactions forward or
// back, and moves abandoned jobs to stale/ for managerd. At startup it
// reconciles every job whose status disagrees with its directory.
package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/logx"
	_ "github.com/farro-dev/farro/internal/metricsd" // --metrics-addr serves internal/metrics
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/internal/watchdog"
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

func main() {
	daemon.Exit("watchdogd", daemon.Run(newApp(os.Stdout, os.Stderr), os.Args))
}

// newApp builds the command; logs and help go to stdout, usage errors to
// stderr.
func newApp(stdout, stderr io.Writer) *cli.App {
	app := daemon.App("watchdogd", "farro recovery daemon: recovers the jobs of dead or silent lock holders", []cli.Flag{
		&cli.DurationFlag{Name: "interval", Value: 500 * time.Millisecond, EnvVars: []string{"FARRO_INTERVAL"}, Usage: "period of the lock checks"},
		&cli.DurationFlag{Name: "crash-threshold", Value: 30 * time.Second, EnvVars: []string{"FARRO_CRASH_THRESHOLD"}, Usage: "a running job whose heartbeat is older than this is taken from its (silent) owner"},
		&cli.DurationFlag{Name: "lock-grace", Value: 5 * time.Second, EnvVars: []string{"FARRO_LOCK_GRACE"}, Usage: "age at which a lock without owner file, or a running job without lock, is recovered"},
		&cli.DurationFlag{Name: "rescan", Value: 10 * time.Second, EnvVars: []string{"FARRO_RESCAN"}, Usage: "full rescan period of incoming/ (fsnotify backup; positive)"},
		&cli.BoolFlag{Name: "no-notify", EnvVars: []string{"FARRO_NO_NOTIFY"}, Usage: "disable fsnotify; rely on rescans"},
		&cli.DurationFlag{Name: "lease-grace", Value: 10 * time.Second, EnvVars: []string{"FARRO_LEASE_GRACE"}, Usage: "with a PostgreSQL --store: how long past its lease a claim is left to its host (whose watchdogd stops the handler) before it is recovered and given to another (0: none)"},
		&cli.DurationFlag{Name: "scratch-retention", Value: 0, EnvVars: []string{"FARRO_SCRATCH_RETENTION"}, Usage: "with a PostgreSQL --store: remove this host's kept working directories (<spool>/scratch/<agent>/<job id>/, an attempt's output) of jobs that succeeded or were killed longer ago than this; those of jobs no longer in the database are removed whatever it is (0: only those)"},
	}, func(c *cli.Context) error { return run(c, stdout) })
	app.Writer, app.ErrWriter = stdout, stderr
	daemon.SetValidator(app, validate)
	return app
}

func run(c *cli.Context, stdout io.Writer) error {
	cfg := watchdog.Config{
		Interval: c.Duration("interval"), CrashThreshold: c.Duration("crash-threshold"),
		LockGrace: c.Duration("lock-grace"), Rescan: c.Duration("rescan"), NoNotify: c.Bool("no-notify"),
	}
	if daemon.StoreURL(c) != "" {
		return runShared(c, stdout)
	}
	if daemon.CheckOnly(c) {
		if err := daemon.CheckSpool(c.String("spool")); err != nil {
			return err
		}
		return daemon.ConfigOK(c)
	}
	log := logx.New(stdout, watchdog.Actor, c.String("log-level"))
	spool, err := daemon.OpenSpool(c.String("spool"), logx.StreamWarn(log))
	if err != nil {
		if !daemon.IsConfigError(err) { // a configuration error is one line on stderr only
			log.Error().Err(err).Msg("cannot open spool")
		}
		return err
	}
	// One watchdogd per spool: refused (exit registry.ExitAlreadyRunning)
	// while another holds agents/daemons/watchdogd.lock.
	reg, err := registry.AcquireDaemon(spool, "watchdogd", registry.Options{Actor: watchdog.Actor, Version: daemon.Version})
	if err != nil {
		return err
	}
	defer reg.Release()
	jobs := spoolstore.New(spool) // watchdogd's door to the spool's jobs
	return daemon.Serve(c.Context, log, "watchdogd", func(ctx context.Context) error {
		var w *watchdog.Watchdog
		cfg.Ready = func() { daemon.Ready(ctx, w.Alive) }
		w = watchdog.New(jobs, cfg, log)
		log.Info().Str("spool", spool.Root).Dur("interval_ms", cfg.Interval).
			Dur("crash_threshold_ms", cfg.CrashThreshold).Dur("lock_grace_ms", cfg.LockGrace).
			Dur("rescan_ms", cfg.Rescan).Bool("no_notify", cfg.NoNotify).Msg("watchdogd starting")
		return w.Run(ctx)
	})
}

// validate is watchdogd's configuration check (daemon.SetValidator):
// every period and threshold must be positive.
func validate(c *cli.Context) error {
	return daemon.First(
		daemon.Positive(c, "interval"),
		daemon.Positive(c, "crash-threshold"),
		daemon.Positive(c, "lock-grace"),
		daemon.Positive(c, "rescan"),
		daemon.NotNegative(c, "lease-grace"),
		daemon.NotNegative(c, "scratch-retention"),
	)
}
