package main

import (
	"context"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/dashboard"
)

// dashboardRefresh is serve's default --refresh.
const dashboardRefresh = 10 * time.Second

// serveCommands is farroctl serve: the dashboard (internal/dashboard).
func serveCommands(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) []*cli.Command {
	return []*cli.Command{{
		Name:  "serve",
		Usage: "serve a dashboard of the spool (or PostgreSQL store) in a browser: overview, jobs, a job's history and output, crawls (read-only unless --actions)",
		Description: `Listens on --listen (loopback by default) and prints the URL. Pages are
rendered on the server and need no JavaScript: the overview (jobs per state
and kind with stats --ages' buckets, the last hour from the event stream, the
oldest queued job, agents and the jobs they hold), the jobs (filters, pages),
a job (job.json, history, output per attempt) and the crawls (status,
budgets, domains, why). It reads the spool with farroctl's own code.
With --store postgres://... (or FARRO_STORE) it reads the database
instead, on one pool of at most 4 connections, each request bounded to
15s (a database that does not answer makes the page say so, and it
works again once the database is back); the crawls and a job's output
are kept in a spool only, and those pages say where to look instead.
With --actions a random token is printed at start; entered at /login, it
enables the buttons hold, release, cancel, requeue, kill, retry and rm on a
job's page (POST only, with the token in the form and a same-site cookie).
Stops on SIGINT or SIGTERM.`,
		OnUsageError: usageErr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8080", Usage: "`HOST:PORT` to listen on; a loopback address unless --allow-remote (port 0: any free port)"},
			&cli.BoolFlag{Name: "allow-remote", Usage: "allow a non-loopback --listen (prints a warning: the dashboard has no login of its own)"},
			&cli.BoolFlag{Name: "actions", Usage: "enable the operator actions, each guarded by a token printed at start"},
			&cli.DurationFlag{Name: "refresh", Value: dashboardRefresh, Usage: "the overview reloads itself this often (0: never)"},
			&cli.IntFlag{Name: "page-size", Value: 50, Usage: "jobs per page of the job list"},
		},
		Action: func(cc *cli.Context) error {
			if cc.Args().Present() {
				return ctl.Usagef("serve takes no arguments")
			}
			if cc.Int("page-size") < 1 || cc.Int("page-size") > 1000 {
				return ctl.Usagef("--page-size must be between 1 and 1000, got %d", cc.Int("page-size"))
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			x := c(cc)
			return dashboard.Run(x, dashboard.Options{
				Listen: cc.String("listen"), AllowRemote: cc.Bool("allow-remote"), Actions: cc.Bool("actions"),
				Refresh: cc.Duration("refresh"), PageSize: cc.Int("page-size"),
				Stdout: x.Stdout, Stderr: x.Stderr, Context: ctx,
			})
		},
	}}
}
