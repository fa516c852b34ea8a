package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// StoreFlag is --store, shared by the daemons: where the jobs are kept.
// A postgres:// (or postgresql://) URL keeps them in PostgreSQL
// (pkg/store/pgstore), shared by the daemons of many hosts; --spool then
// names only this host's local directory (handler working directories,
// the registry of this host's daemons). Anything else names a spool, as
// --spool does. Unset: the spool of --spool, exactly as without it.
var StoreFlag = &cli.StringFlag{
	Name: "store", EnvVars: []string{"FARRO_STORE"},
	Usage: "where the jobs are: postgres://USER@HOST:PORT/DB for a queue shared by several hosts (--spool is then this host's local directory), or a spool directory (as --spool). Unset: the spool of --spool",
}

// ScratchDir is, under a daemon's local directory (--spool with a
// PostgreSQL store), where each attempt gets its working directory
// (<scratch>/<agent>/<job id>).
const ScratchDir = "scratch"

// StoreURL returns the PostgreSQL URL of --store (FARRO_STORE), or "" when
// the daemon works on a spool.
func StoreURL(c *cli.Context) string {
	if v := c.String(StoreFlag.Name); store.IsPostgresURL(v) {
		return v
	}
	return ""
}

// checkStore is checkConfig's part for --store: a value that is not a
// PostgreSQL URL names the spool, and must not disagree with --spool.
func checkStore(c *cli.Context) error {
	v := c.String(StoreFlag.Name)
	if v == "" || store.IsPostgresURL(v) {
		return nil
	}
	if c.IsSet(SpoolFlag.Name) && c.String(SpoolFlag.Name) != v {
		return Configf("%s and %s name two different spools (%q, %q): give one", Ref(c, StoreFlag.Name), Ref(c, SpoolFlag.Name), clip(v), clip(c.String(SpoolFlag.Name)))
	}
	return c.Set(SpoolFlag.Name, v)
}

// OpenPostgres opens the PostgreSQL store at url for a daemon whose local
// directory is local: attempts work under local/ScratchDir. A database
// that was never migrated, or whose schema is older or newer than this
// build's, is a *ConfigError (one line; run farroctl migrate, or upgrade
// farro): restarting cannot fix it.
func OpenPostgres(ctx context.Context, url, local string, opts ...pgstore.Option) (*pgstore.Store, error) {
	s, err := pgstore.Open(ctx, url, append([]pgstore.Option{pgstore.WithScratch(filepath.Join(local, ScratchDir))}, opts...)...)
	if err != nil {
		if errors.Is(err, pgstore.ErrNotMigrated) || errors.Is(err, pgstore.ErrSchemaNewer) {
			return nil, &ConfigError{Err: err}
		}
		return nil, err
	}
	return s, nil
}

// OpenLocal opens a daemon's local directory (--spool with a PostgreSQL
// store): laid out as a spool when it is empty or missing, so that the
// registry of this host's daemons (one agent id, one process on this
// host) and the handler records live where they do on a spool. No job of
// the queue is ever in it.
func OpenLocal(root string, opts ...job.Option) (*job.Spool, error) {
	s, err := job.Open(root, append([]job.Option{job.Existing()}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("local directory %s: %w", root, spoolError(err))
	}
	return s, nil
}

// OpenShared opens what a daemon with a PostgreSQL store (--store URL)
// works on: its local directory (--spool, see OpenLocal, with opts) and
// the store, with a pool of at most maxConns connections (0: pgstore's
// default).
func OpenShared(ctx context.Context, c *cli.Context, maxConns int, opts ...job.Option) (*job.Spool, *pgstore.Store, error) {
	local, err := OpenLocal(c.String(SpoolFlag.Name), opts...)
	if err != nil {
		return nil, nil, err
	}
	var po []pgstore.Option
	if maxConns > 0 {
		po = append(po, pgstore.WithMaxConns(maxConns))
	}
	st, err := OpenPostgres(ctx, StoreURL(c), local.Root, po...)
	if err != nil {
		return nil, nil, err
	}
	return local, st, nil
}

// CheckShared is --check-config's check of a PostgreSQL store: the local
// directory (as CheckSpool) and the database's schema (connecting,
// changing nothing).
func CheckShared(ctx context.Context, c *cli.Context) error {
	if err := CheckSpool(c.String(SpoolFlag.Name)); err != nil {
		return err
	}
	st, err := OpenPostgres(ctx, StoreURL(c), c.String(SpoolFlag.Name))
	if err != nil {
		return err
	}
	return st.Close()
}

// Shared is what a one-per-host daemon (managerd, watchdogd) holds on a
// PostgreSQL store: its local directory, the store, and its registry
// lock there.
type Shared struct {
	Local *job.Spool
	Store *pgstore.Store
	reg   *registry.Holder
	row   *Registration
}

// OpenSharedDaemon opens a one-per-host daemon's local directory and
// store (OpenShared) and takes its registry lock (refused, exit
// registry.ExitAlreadyRunning, while another holds it), then writes its
// row in the agents table (kind name, id this host; MaxAttempts is
// managerd's advertised limit), renewed until Close. An error other
// than a configuration error is logged too. Close releases all.
func OpenSharedDaemon(c *cli.Context, log zerolog.Logger, name string, o registry.Options) (*Shared, error) {
	local, st, err := OpenShared(c.Context, c, 0, logx.StreamWarn(log))
	if err != nil {
		if !IsConfigError(err) { // a configuration error is one line on stderr only
			log.Error().Err(err).Msg("cannot open the store")
		}
		return nil, err
	}
	reg, err := registry.AcquireDaemon(local, name, o)
	if err != nil {
		st.Close()
		return nil, err
	}
	row, err := Register(c.Context, log, st, pgstore.Registration{Kind: name, ID: Host(), MaxAttempts: o.MaxAttempts, Version: o.Version})
	if err != nil {
		_ = reg.Release()
		st.Close()
		return nil, err
	}
	return &Shared{Local: local, Store: st, reg: reg, row: row}, nil
}

// Close stamps the agents row stopped, releases the registry lock and
// closes the store.
func (s *Shared) Close() {
	s.row.Stop()
	_ = s.reg.Release()
	_ = s.Store.Close()
}
