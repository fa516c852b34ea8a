package main

import (
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/pkg/store"
)

// globalStoreFlag is farroctl's --store (else FARRO_STORE): a
// postgres:// URL runs the job commands on that database; a directory is
// the spool, as --spool (which wins when given too).
func globalStoreFlag() cli.Flag {
	f := *commandStoreFlag
	f.EnvVars = []string{"FARRO_STORE"}
	return &f
}

// storeFor is the --store of cc: given on the command line (before or
// after the command), else FARRO_STORE.
func storeFor(cc *cli.Context) string {
	if v, ok := localFlag(cc, "store"); ok {
		return v
	}
	return os.Getenv("FARRO_STORE")
}

// localFlag is the value of flag name given on the command line (or,
// for an app-level flag, by its environment variable), at the deepest
// level of cc's lineage that has one; empty values do not count.
func localFlag(cc *cli.Context, name string) (string, bool) {
	for _, cx := range cc.Lineage() {
		if slices.Contains(cx.LocalFlagNames(), name) {
			if v := cx.String(name); v != "" {
				return v, true
			}
		}
	}
	return "", false
}

// newCtl is the Ctl of a command: its spool (--spool, else a --store
// that names a directory) and its store.
func newCtl(cc *cli.Context) *ctl.Ctl {
	c := &ctl.Ctl{Root: daemon.SpoolFor(cc), Store: storeFor(cc)}
	if _, given := localFlag(cc, daemon.SpoolFlag.Name); c.Store != "" && !c.OnStore() && !given {
		c.Root = c.Store
	}
	return c
}

// storeNeutral are the commands that do not touch jobs.
var storeNeutral = []string{"completion"}

// commandStoreFlag is the --store every command gets of its own (the env
// var stays the app-level flag's). One flag serves every command: only
// one command's flags are parsed in a run.
var commandStoreFlag = &cli.StringFlag{Name: "store", Usage: "where the jobs are: a PostgreSQL database (postgres://USER@HOST:PORT/DB) or a spool directory (as --spool)"}

// storeAnywhere gives every command (and subcommand) its own --store, so
// that it may follow the command as --spool may, and makes every command
// that does not work on a PostgreSQL store yet refuse one at once
// (refuseOnStore): the one check, for every command. nested: cmds are
// subcommands, spool-only when their command is.
func storeAnywhere(cmds []*cli.Command, nested, spoolOnly bool) {
	for _, cmd := range cmds {
		only := spoolOnly
		if !nested {
			only = !slices.Contains(ctl.StoreCommands, cmd.Name) && !slices.Contains(storeNeutral, cmd.Name)
		}
		if !slices.ContainsFunc(cmd.Flags, hasStoreFlag) {
			cmd.Flags = append(cmd.Flags, commandStoreFlag)
		}
		if only && len(cmd.Subcommands) == 0 && cmd.Before == nil {
			cmd.Before = refuseOnStore
		}
		storeAnywhere(cmd.Subcommands, true, only)
	}
}

func hasStoreFlag(f cli.Flag) bool { return daemon.FlagNamed(f, "store") }

// refuseOnStore is the usage error of a spool-only command given a
// PostgreSQL store: it names the command and its database equivalent.
func refuseOnStore(cc *cli.Context) error {
	if !store.IsPostgresURL(storeFor(cc)) {
		return nil
	}
	var names []string
	for _, cx := range cc.Lineage() {
		if cx.Command != nil && cx.Command.Name != "" && cx.Command.Name != cc.App.Name {
			names = append([]string{cx.Command.Name}, names...)
		}
	}
	return ctl.SpoolOnly(strings.Join(names, " "))
}
