// Command watchdogd is farro's recovery daemon: it finds claim locks whose
// holder died or went silent, rolls their half-done transactions forward or
// back, and moves abandoned jobs to stale/ for managerd. At startup it
// reconciles every job whose status disagrees with its directory.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/internal/watchdog"
	"github.com/farro-dev/farro/pkg/job"
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
		&cli.DurationFlag{Name: "rescan", Value: 10 * time.Second, EnvVars: []string{"FARRO_RESCAN"}, Usage: "full rescan period of incoming/ (fsnotify backup)"},
		&cli.BoolFlag{Name: "no-notify", EnvVars: []string{"FARRO_NO_NOTIFY"}, Usage: "disable fsnotify; rely on rescans"},
	}, func(c *cli.Context) error { return run(c, stdout) })
	app.Writer, app.ErrWriter = stdout, stderr
	return app
}

func run(c *cli.Context, stdout io.Writer) error {
	cfg := watchdog.Config{
		Interval: c.Duration("interval"), CrashThreshold: c.Duration("crash-threshold"),
		LockGrace: c.Duration("lock-grace"), Rescan: c.Duration("rescan"), NoNotify: c.Bool("no-notify"),
	}
	if err := validate(cfg); err != nil {
		return err
	}
	log := logx.New(stdout, watchdog.Actor, c.String("log-level"))
	spool, err := job.Open(c.String("spool"), job.Existing(), logx.StreamWarn(log))
	if err != nil {
		log.Error().Err(err).Msg("cannot open spool")
		return err
	}
	// One watchdogd per spool: refused (exit registry.ExitAlreadyRunning)
	// while another holds agents/daemons/watchdogd.lock.
	reg, err := registry.AcquireDaemon(spool, "watchdogd", registry.Options{Actor: watchdog.Actor, Version: daemon.Version})
	if err != nil {
		return err
	}
	defer reg.Release()
	return daemon.Serve(c.Context, log, "watchdogd", func(ctx context.Context) error {
		var w *watchdog.Watchdog
		cfg.Ready = func() { daemon.Ready(ctx, w.Alive) }
		w = watchdog.New(spool, cfg, log)
		log.Info().Str("spool", spool.Root).Dur("interval_ms", cfg.Interval).
			Dur("crash_threshold_ms", cfg.CrashThreshold).Dur("lock_grace_ms", cfg.LockGrace).
			Dur("rescan_ms", cfg.Rescan).Bool("no_notify", cfg.NoNotify).Msg("watchdogd starting")
		return w.Run(ctx)
	})
}

func validate(cfg watchdog.Config) error {
	switch {
	case cfg.Interval <= 0:
		return errors.New("--interval must be positive")
	case cfg.CrashThreshold <= 0:
		return errors.New("--crash-threshold must be positive")
	case cfg.LockGrace <= 0:
		return errors.New("--lock-grace must be positive")
	case cfg.Rescan <= 0:
		return errors.New("--rescan must be positive")
	}
	return nil
}
