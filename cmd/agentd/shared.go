package main

import (
	"slices"
	"sort"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// runsKinds are the kinds this agent claims: those with a handler, of
// --kinds when given.
func runsKinds(handlers map[string]agent.Handler, kinds []string) []string {
	out := []string{}
	for k := range handlers {
		if len(kinds) == 0 || slices.Contains(kinds, k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// runShared is agentd on a PostgreSQL store (--store URL): the jobs come
// from the database, shared with the agents of other hosts; --spool is
// this host's local directory (the attempts' working directories, the
// handler records this host's watchdogd reads, and the registry lock that
// keeps one agent id one process on this host). The built-in kinds that
// work on a spool's files (crawl.fetch, crawl.robots, source.check) do
// not run here: noop and exec do. --rescan and --no-notify are the
// spool's (a slot waits for a notification from the database, and claims
// again at least every second).
func runShared(c *cli.Context, log zerolog.Logger, command, kinds []string, outputMax int64) error {
	// A connection for each slot's claim and one for each running job's
	// heartbeat, request check or commit; one listens for queued jobs.
	local, st, err := daemon.OpenShared(c.Context, c, 2*c.Int("concurrency")+2, logx.StreamWarn(log))
	if err != nil {
		return err
	}
	defer st.Close()
	reg, err := registry.AcquireAgent(local, c.String("id"), registry.Options{
		Actor: "agentd/" + c.String("id"), Slots: c.Int("concurrency"), Version: daemon.Version})
	if err != nil {
		return err
	}
	defer reg.Release()
	handlers := map[string]agent.Handler{"noop": agent.Noop}
	addExec(c, log, handlers, command, kinds, outputMax, "this agent runs only noop jobs from the database")
	cfg := agentConfig(c, handlers, kinds, log)
	// Its row in the agents table: the same agent id live on another
	// host refuses this one (exit 150), as the local registry does on
	// this host.
	row, err := daemon.Register(c.Context, log, st, pgstore.Registration{Kind: pgstore.KindAgentd, ID: c.String("id"),
		Concurrency: c.Int("concurrency"), Kinds: runsKinds(handlers, kinds)})
	if err != nil {
		return err
	}
	defer row.Stop()
	cfg.Store, cfg.Local, cfg.Lease = st, local.Root, c.Duration("lease")
	return serve(cfg, command, func(a *agent.Agent) {
		log.Info().Str("store", "postgres").Str("local", local.Root).Int("concurrency", c.Int("concurrency")).
			Strs("kinds", a.Kinds()).Strs("exec", command).Dur("lease_ms", c.Duration("lease")).Msg("agentd ready")
	})
}
