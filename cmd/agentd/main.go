// Command agentd is farro's worker daemon: it claims jobs from the spool,
// runs their handler, heartbeats, and commits the outcome.
package main

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/fetch"
	"github.com/farro-dev/farro/internal/logx"
	_ "github.com/farro-dev/farro/internal/metricsd" // --metrics-addr serves internal/metrics
	"github.com/farro-dev/farro/internal/pipeline"
	"github.com/farro-dev/farro/internal/politeness"
	"github.com/farro-dev/farro/internal/registry"
)

func main() {
	app := newApp()
	args, handlerArgs := splitExec(os.Args)
	app.Metadata["exec-args"] = handlerArgs
	daemon.Exit("agentd", daemon.Run(app, args))
}

// newApp builds the command: flags, configuration check, man page.
func newApp() *cli.App {
	app := daemon.App("agentd", "farro worker daemon: claims and runs jobs", []cli.Flag{
		&cli.StringFlag{Name: "id", EnvVars: []string{"FARRO_AGENT_ID"}, Required: true, Usage: "agent id (names in-progress/<id>/)"},
		&cli.StringFlag{Name: "exec", EnvVars: []string{"FARRO_EXEC"}, Usage: "command run for exec jobs; everything after it on the command line is its arguments (FARRO_EXEC: split on spaces). Checked at start: missing or not executable exits with status " + strconv.Itoa(agent.ExitHandlerUnusable) + ". Unset: exec jobs are left queued, the built-in kinds run"},
		&cli.StringFlag{Name: "kinds", EnvVars: []string{"FARRO_KINDS"}, Usage: "claim only these job kinds, comma separated (exec, noop, crawl.fetch, crawl.robots, source.check; crawl = crawl.fetch,crawl.robots). A kind without a handler here (exec without --exec, an unknown kind) exits with status " + strconv.Itoa(daemon.ExitConfig) + ". Unset or empty: every kind this agent has a handler for"},
		&cli.IntFlag{Name: "concurrency", Value: 1, EnvVars: []string{"FARRO_CONCURRENCY"}, Usage: "worker slots (at least 1)"},
		&cli.DurationFlag{Name: "timeout", Value: time.Hour, EnvVars: []string{"FARRO_TIMEOUT"}, Usage: "per-job timeout (0: none); kills the handler's process group"},
		&cli.DurationFlag{Name: "heartbeat", Value: 2 * time.Second, EnvVars: []string{"FARRO_HEARTBEAT"}, Usage: "heartbeat interval (positive)"},
		&cli.DurationFlag{Name: "drain-timeout", Value: 30 * time.Second, EnvVars: []string{"FARRO_DRAIN_TIMEOUT"}, Usage: "on SIGTERM, time running jobs get to finish before they are released (positive)"},
		&cli.DurationFlag{Name: "kill-grace", Value: 5 * time.Second, EnvVars: []string{"FARRO_KILL_GRACE"}, Usage: "SIGTERM to SIGKILL delay when a handler is stopped (positive)"},
		&cli.DurationFlag{Name: "rescan", Value: 10 * time.Second, EnvVars: []string{"FARRO_RESCAN"}, Usage: "full rescan period of incoming/ (fsnotify backup; positive)"},
		&cli.StringFlag{Name: "output-max", Value: "16MiB", EnvVars: []string{"FARRO_OUTPUT_MAX"}, Usage: "bytes of output (stdout and stderr together) an exec job's attempt keeps in stdout.<N>.log/stderr.<N>.log, e.g. 64KiB, 16MiB, 1GiB; the rest is read, dropped and counted in a note line (0: no limit)"},
		&cli.BoolFlag{Name: "no-notify", EnvVars: []string{"FARRO_NO_NOTIFY"}, Usage: "disable fsnotify; rely on rescans"},
		&cli.DurationFlag{Name: "lease", Value: agent.DefaultLease, EnvVars: []string{"FARRO_LEASE"}, Usage: "with a PostgreSQL --store: each claim's lease, renewed by every heartbeat; a claim not renewed for this long may be given to another agent (positive, longer than --heartbeat)"},
	}, run)
	app.ArgsUsage = "[--exec CMD [ARG...]]"
	daemon.SetValidator(app, validate)
	addMan(app)
	return app
}

func run(c *cli.Context) error {
	command := handlerCommand(c)
	if daemon.CheckOnly(c) {
		return checkOnly(c, command)
	}
	log := logx.New(os.Stdout, "agentd/"+c.String("id"), c.String("log-level"))
	var kinds []string // nil: every kind with a handler
	if k := c.String("kinds"); k != "" {
		var err error
		if kinds, err = agent.ParseKinds(k); err != nil {
			return err // refused before the spool is touched
		}
	}
	outputMax, _ := agent.ParseSize(c.String("output-max")) // checked by validate
	if daemon.StoreURL(c) != "" {
		return runShared(c, log, command, kinds, outputMax)
	}
	spool, err := daemon.OpenSpool(c.String("spool"), logx.StreamWarn(log))
	if err != nil {
		return err
	}
	// One agent id, one process: refused (exit registry.ExitAlreadyRunning)
	// while another holds agents/<id>.lock.
	reg, err := registry.AcquireAgent(spool, c.String("id"), registry.Options{
		Actor: "agentd/" + c.String("id"), Slots: c.Int("concurrency"), Version: daemon.Version})
	if err != nil {
		return err
	}
	defer reg.Release()
	if handlerArgs, _ := c.App.Metadata["exec-args"].([]string); len(handlerArgs) > 0 {
		for _, a := range agentFlagsIn(c.App.Flags, handlerArgs[1:]) {
			log.Warn().Str("argument", a).Strs("exec", handlerArgs).
				Msg("a handler argument looks like an agentd flag: everything after --exec CMD goes to the handler; put agentd's flags before --exec")
		}
	}
	fetcher := fetch.NewHandler(spool, nil)
	// A file there that is not a gate was moved aside if it could be
	// (moved_to), else the request failed with the same one-line error.
	fetcher.Gates.OnBadFile = func(e *politeness.BadFileError) {
		log.Warn().Str("path", e.Path).Str("moved_to", e.Moved).Str("reason", e.Why).Msg("a file at a politeness gate's path is not a gate")
	}
	handlers := map[string]agent.Handler{
		"noop": agent.Noop,
		// The crawl handlers: one URL, one robots.txt (internal/fetch).
		"crawl.fetch":  fetcher,
		"crawl.robots": &fetch.RobotsHandler{Handler: fetcher},
		// The content pipeline's source checks (internal/pipeline).
		pipeline.KindCheck: pipeline.NewCheckHandler(spool, fetcher),
	}
	addExec(c, log, handlers, command, kinds, outputMax, "this agent runs only the built-in kinds (noop, crawl.fetch, crawl.robots, source.check)")
	cfg := agentConfig(c, handlers, kinds, log)
	// The jobs come through the store seam: the spool's store with the
	// bounded index of incoming/ that makes claims cheap.
	st := agent.SpoolStore(spool, c.Duration("rescan"), c.Bool("no-notify"), log)
	defer st.Close()
	cfg.Store, cfg.NoNotify = st, c.Bool("no-notify")
	return serve(cfg, command, func(a *agent.Agent) {
		log.Info().Str("spool", spool.Root).Int("concurrency", c.Int("concurrency")).Strs("kinds", a.Kinds()).Strs("exec", command).Msg("agentd ready")
	})
}

// serve makes the agent of cfg and runs it until SIGTERM or SIGINT;
// ready logs its ready line once it claims.
func serve(cfg agent.Config, command []string, ready func(*agent.Agent)) error {
	log := cfg.Log
	a, err := agent.New(cfg)
	if err != nil {
		log.Error().Err(err).Strs("exec", command).Msg("agentd not started")
		return err
	}
	return daemon.Serve(context.Background(), log, "agentd", func(ctx context.Context) error {
		go func() {
			select {
			case <-a.Ready():
				ready(a)
				daemon.Ready(ctx, nil)
			case <-ctx.Done():
			}
		}()
		return a.Run(ctx)
	})
}

// addExec adds the exec handler of command to handlers, or, without one,
// says in one line that exec jobs are left queued (what runs names what
// this agent runs then).
func addExec(c *cli.Context, log zerolog.Logger, handlers map[string]agent.Handler, command, kinds []string, outputMax int64, what string) {
	if len(command) > 0 {
		// Checked by agent.New: a missing or non-executable program is
		// refused (exit agent.ExitHandlerUnusable) rather than failing
		// every exec job.
		handlers["exec"] = &agent.Exec{Command: command, KillGrace: c.Duration("kill-grace"), OutputMax: outputMax}
	} else if kinds == nil {
		log.Warn().Msg("no --exec (FARRO_EXEC): " + what + "; exec jobs are left queued")
	}
	if len(command) > 0 && kinds != nil && !slices.Contains(kinds, "exec") {
		log.Warn().Strs("kinds", kinds).Msg("--exec (FARRO_EXEC) is ignored: exec is not in --kinds (FARRO_KINDS)")
	}
}

// agentConfig is the agent's configuration from the flags, whatever
// keeps the jobs.
func agentConfig(c *cli.Context, handlers map[string]agent.Handler, kinds []string, log zerolog.Logger) agent.Config {
	return agent.Config{
		ID: c.String("id"), Handlers: handlers, Kinds: kinds,
		Concurrency: c.Int("concurrency"), Timeout: c.Duration("timeout"),
		Heartbeat: c.Duration("heartbeat"), DrainTimeout: c.Duration("drain-timeout"), Log: log,
	}
}

// splitExec cuts "--exec CMD [ARG...]" off the command line: everything
// after --exec belongs to the handler command, flags included.
// agentFlagsIn returns the handler arguments that look like one of
// agentd's own flags (--concurrency 4 written after --exec CMD).
func agentFlagsIn(flags []cli.Flag, handlerArgs []string) []string {
	var out []string
	for _, a := range handlerArgs {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		for _, f := range flags {
			for _, n := range f.Names() {
				if n == name && len(name) > 1 {
					out = append(out, a)
				}
			}
		}
	}
	return out
}

func splitExec(args []string) (agentArgs, command []string) {
	for i, a := range args {
		switch {
		case a == "--exec" || a == "-exec":
			return args[:i], args[i+1:]
		case strings.HasPrefix(a, "--exec=") || strings.HasPrefix(a, "-exec="):
			_, v, _ := strings.Cut(a, "=")
			return args[:i], append([]string{v}, args[i+1:]...)
		case a == "--":
			return args, nil
		}
	}
	return args, nil
}
