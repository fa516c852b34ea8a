// Package daemon is what the three daemons share: their common flags, the
// signal context that starts a graceful drain, and the systemd protocol
// (sd_notify READY/WATCHDOG/STOPPING), which is a no-op outside systemd.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
)

// Version is set at build time with -ldflags "-X .../internal/daemon.Version=...".
var Version = "0.1.0-dev"

// DefaultSpool is --spool's default: ./spool from a source build, set to
// /var/spool/farro by the Debian package (-ldflags "-X ...DefaultSpool=").
var DefaultSpool = "./spool"

// EnvFile is the environment file the packaged units read
// (EnvironmentFile=); empty in a source build. farroctl takes FARRO_SPOOL
// from it when neither --spool nor FARRO_SPOOL is given (SpoolFor), so
// that the operator's shell and the daemons agree on one place.
var EnvFile = ""

// SpoolFlag is --spool, shared by every binary.
var SpoolFlag = &cli.StringFlag{
	Name: "spool", Value: DefaultSpool, EnvVars: []string{"FARRO_SPOOL"},
	Usage: "spool directory",
}

// SpoolFor returns the spool a command run with c uses: --spool where it
// was given (before the command or after it: see SpoolAnywhere; the one
// nearest the command wins), else FARRO_SPOOL, else FARRO_SPOOL of
// EnvFile (packaged builds), else DefaultSpool.
func SpoolFor(c *cli.Context) string {
	for _, cx := range c.Lineage() {
		for _, n := range cx.LocalFlagNames() {
			if v := cx.String(SpoolFlag.Name); n == SpoolFlag.Name && v != "" {
				return v
			}
		}
	}
	if v := os.Getenv("FARRO_SPOOL"); v != "" {
		return v
	}
	if EnvFile != "" {
		if v, ok := EnvFileValue(EnvFile, "FARRO_SPOOL"); ok && v != "" {
			return v
		}
	}
	return DefaultSpool
}

// SpoolAnywhere lets --spool follow a command as well as precede it
// ("farroctl ls --spool DIR"): every command and subcommand gets its own
// copy of the flag. Read the value with SpoolFor.
func SpoolAnywhere(cmds []*cli.Command) {
	for _, cmd := range cmds {
		has := false
		for _, f := range cmd.Flags {
			has = has || FlagNamed(f, SpoolFlag.Name)
		}
		if !has {
			// The command line only: FARRO_SPOOL is the app-level flag's,
			// so that --spool before the command still beats it.
			f := *SpoolFlag
			f.EnvVars = nil
			cmd.Flags = append(cmd.Flags, &f)
		}
		SpoolAnywhere(cmd.Subcommands)
	}
}

// FlagNamed reports whether one of f's names is name. For the flag types
// farro uses it reads the names themselves: cli.Flag.Names runs a regular
// expression over each name, and SpoolAnywhere looks at every flag of
// every command at every farroctl start (farroctl's argument reordering
// at every flag it is given).
func FlagNamed(f cli.Flag, name string) bool {
	var n string
	var aliases []string
	switch f := f.(type) {
	case *cli.StringFlag:
		n, aliases = f.Name, f.Aliases
	case *cli.BoolFlag:
		n, aliases = f.Name, f.Aliases
	case *cli.DurationFlag:
		n, aliases = f.Name, f.Aliases
	case *cli.IntFlag:
		n, aliases = f.Name, f.Aliases
	case *cli.Int64Flag:
		n, aliases = f.Name, f.Aliases
	case *cli.StringSliceFlag:
		n, aliases = f.Name, f.Aliases
	case *cli.GenericFlag:
		n, aliases = f.Name, f.Aliases
	default:
		return slices.Contains(f.Names(), name)
	}
	return n == name || slices.Contains(aliases, name)
}

// EnvFileValue reads key from a systemd environment file of plain
// KEY=value lines (comments and blank lines skipped, optional quotes
// around the value); the last assignment wins, as for systemd. A missing
// or unreadable file has no value.
func EnvFileValue(path, key string) (string, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	val, found := "", false
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) != key {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		val, found = v, true
	}
	return val, found
}

// LogLevelFlag is --log-level.
var LogLevelFlag = &cli.StringFlag{
	Name: "log-level", Value: "info", EnvVars: []string{"FARRO_LOG_LEVEL"},
	Usage: "debug, info, warn or error",
}

// App returns a cli.App with farro's conventions: version, the common flags
// (--spool, --store, --log-level, --metrics-addr, --metrics-allow-remote) followed
// by flags, and action run as the default command. With --metrics-addr the
// metrics endpoint is up before action runs and closed after it returns.
//
// Configuration mistakes are refused before anything starts, each as one
// *ConfigError (exit ExitConfig, one line on stderr, nothing on stdout):
// a value that does not parse, an unknown flag, a missing required flag
// (urfave/cli's own refusals would print the whole help on stdout, the
// log stream), a --log-level not in LogLevels, a metrics address that
// CheckAddr refuses, and what the daemon's Validator (SetValidator)
// refuses. Unknown FARRO_* variables are logged at warn level, one line
// each. With --check-config (CheckOnly) the action checks and returns.
func App(name, usage string, flags []cli.Flag, action cli.ActionFunc) *cli.App {
	all := append([]cli.Flag{SpoolFlag, StoreFlag, LogLevelFlag, MetricsAddrFlag, MetricsAllowRemoteFlag}, flags...)
	all = append(all, CheckConfigFlag)
	app := &cli.App{
		Name: name, Usage: usage, Version: Version,
		Flags:                all,
		Action:               action,
		Before:               before(name),
		After:                stopMetrics,
		HideHelpCommand:      true,
		EnableBashCompletion: true,
		Metadata:             map[string]any{requiredKey: stripRequired(all)},
		// Exit codes are decided by Exit, not by urfave/cli.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	app.OnUsageError = func(c *cli.Context, err error, _ bool) error { return usageError(c.App, err) }
	SetMan(app, DaemonMan(name))
	app.Description = daemonDescription(app)
	return app
}

// ExitCode is the exit status for err: 0 for nil, the error's own
// ExitCode() when it (or an error it wraps) has one (e.g.
// registry.ExitAlreadyRunning), else 1.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return 1
}

// Exit ends a daemon's main: err (if any) as one line "name: err" on
// stderr, and the status ExitCode(err).
func Exit(name string, err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, name+": "+strings.ReplaceAll(err.Error(), "\n", " "))
	}
	os.Exit(ExitCode(err))
}

// SignalContext returns a context cancelled by the first SIGTERM or SIGINT;
// a second signal is left to the default handler (immediate exit).
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case <-ch:
			signal.Stop(ch)
			cancel()
		case <-ctx.Done():
			signal.Stop(ch)
		}
	}()
	return ctx, cancel
}

// Ready tells systemd the daemon is up and starts the WATCHDOG=1 pings at
// half the unit's WatchdogSec, while alive() holds, until ctx is done.
// Outside systemd it does nothing.
func Ready(ctx context.Context, alive func() bool) {
	_, _ = daemon.SdNotify(false, daemon.SdNotifyReady)
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	go func() {
		t := time.NewTicker(interval / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if alive == nil || alive() {
					_, _ = daemon.SdNotify(false, daemon.SdNotifyWatchdog)
				}
			}
		}
	}()
}

// Stopping tells systemd the daemon is draining.
func Stopping() { _, _ = daemon.SdNotify(false, daemon.SdNotifyStopping) }

// Serve runs fn with a context that the first SIGTERM or SIGINT cancels,
// tells systemd STOPPING once fn returns, and logs the end (with the error,
// if any) as the daemon's last line.
func Serve(parent context.Context, log zerolog.Logger, name string, fn func(ctx context.Context) error) error {
	ctx, cancel := SignalContext(parent)
	defer cancel()
	err := fn(ctx)
	Stopping()
	if err != nil {
		log.Error().Err(err).Msg(name + " stopped")
		return err
	}
	log.Info().Msg(name + " stopped")
	return nil
}
