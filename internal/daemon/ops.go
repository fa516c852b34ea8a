package daemon

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/completion"
	"github.com/farro-dev/farro/internal/logx"
)

// MetricsAddrFlag is --metrics-addr: where to serve Prometheus metrics.
// Off by default; loopback only unless --metrics-allow-remote.
var MetricsAddrFlag = &cli.StringFlag{
	Name: "metrics-addr", EnvVars: []string{"FARRO_METRICS_ADDR"},
	Usage: "serve Prometheus metrics on `HOST:PORT` at /metrics (loopback only, e.g. 127.0.0.1:9641; empty: off)",
}

// MetricsAllowRemoteFlag is --metrics-allow-remote.
var MetricsAllowRemoteFlag = &cli.BoolFlag{
	Name: "metrics-allow-remote", EnvVars: []string{"FARRO_METRICS_ALLOW_REMOTE"},
	Usage: "let --metrics-addr be a non-loopback address (the endpoint has no authentication)",
}

// MetricsRescanFlag is managerd's --metrics-rescan: how often the spool
// view behind the job-count metrics relists the spool in full (fsnotify
// events keep it current in between).
var MetricsRescanFlag = &cli.DurationFlag{
	Name: "metrics-rescan", Value: time.Minute, EnvVars: []string{"FARRO_METRICS_RESCAN"},
	Usage: "with --metrics-addr: full relisting period of the spool behind farro_jobs (fsnotify keeps it current in between); on a PostgreSQL store, how often farro_jobs is read from the database",
}

const metricsKey = "farro-metrics-server"

// MetricsServer is a daemon's running metrics endpoint.
type MetricsServer interface {
	Addr() string // the address listened on
	Close() error
}

// MetricsBackend serves daemon name's metrics (version being this build's
// Version) on addr, checked with tally.CheckAddr. This package links no
// Prometheus code (farroctl shares it and starts without it): the
// daemons link internal/metricsd, whose package initialisation installs
// internal/metrics as the backend.
type MetricsBackend func(name, version, addr string, allowRemote bool) (MetricsServer, error)

var metricsBackend MetricsBackend

// SetMetricsBackend installs b. Call it only from a package
// initialisation (internal/metricsd does).
func SetMetricsBackend(b MetricsBackend) { metricsBackend = b }

// MetricsEnabled reports whether this daemon serves metrics.
func MetricsEnabled(c *cli.Context) bool { return c.String(MetricsAddrFlag.Name) != "" }

// startMetrics is the Before hook of every daemon: with --metrics-addr it
// binds the endpoint before the daemon starts (a refused or busy address is
// a startup error) and serves name's metrics.
func startMetrics(name string) cli.BeforeFunc {
	return func(c *cli.Context) error {
		addr := c.String(MetricsAddrFlag.Name)
		if addr == "" {
			return nil
		}
		if metricsBackend == nil {
			return Configf("%s: %s was built without metrics (internal/metricsd is not linked)", Ref(c, MetricsAddrFlag.Name), name)
		}
		srv, err := metricsBackend(name, Version, addr, c.Bool(MetricsAllowRemoteFlag.Name))
		if err != nil {
			return err
		}
		if c.App.Metadata == nil {
			c.App.Metadata = map[string]any{}
		}
		c.App.Metadata[metricsKey] = srv
		actor := name
		if id := c.String("id"); id != "" {
			actor += "/" + id
		}
		log := logx.New(writer(c.App), actor, c.String(LogLevelFlag.Name))
		log.Info().Str("addr", srv.Addr()).Msg("metrics endpoint listening on http://" + srv.Addr() + "/metrics")
		return nil
	}
}

// stopMetrics is the After hook: it closes the endpoint.
func stopMetrics(c *cli.Context) error {
	if srv, ok := c.App.Metadata[metricsKey].(MetricsServer); ok {
		delete(c.App.Metadata, metricsKey)
		return srv.Close()
	}
	return nil
}

// Run runs a daemon's app, first answering the two invocations that are
// not the daemon itself (they need none of its required flags):
//
//	NAME completion bash|zsh   print a shell completion script
//	NAME man                   print the man page (roff), for packaging
func Run(app *cli.App, args []string) error {
	if len(args) >= 2 {
		out := app.Writer
		if out == nil {
			out = os.Stdout
		}
		switch args[1] {
		case "completion":
			if len(args) != 3 {
				return fmt.Errorf("usage: %s completion bash|zsh", app.Name)
			}
			return completion.Write(out, app, args[2], nil)
		case "man":
			return WriteMan(out, app)
		}
	}
	if app.Metadata == nil {
		app.Metadata = map[string]any{}
	}
	app.Metadata[argsKey] = args
	return app.Run(args)
}

// writer is app's standard output: its Writer, else os.Stdout.
func writer(app *cli.App) io.Writer {
	if app.Writer != nil {
		return app.Writer
	}
	return os.Stdout
}
