package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/pkg/store"
)

// globalStoreFlag is farroctl's --store (else FARRO_STORE): a
// postgres:// URL runs the job commands on that database; a directory is
// the spool, as --spool (giving both, naming two directories, is a usage
// error: oneSpool).
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
		if len(cmd.Subcommands) == 0 {
			// Static functions, not a closure per command: every start
			// builds the whole tree (TestVersionAllocatesLittle).
			check := oneSpool
			if only {
				check = oneSpoolNotOnStore
			}
			if cmd.Before != nil {
				check = chainBefore(check, cmd.Before)
			}
			cmd.Before = check
		}
		storeAnywhere(cmd.Subcommands, true, only)
	}
}

// chainBefore runs a, then b unless a failed.
func chainBefore(a, b cli.BeforeFunc) cli.BeforeFunc {
	return func(cc *cli.Context) error {
		if err := a(cc); err != nil {
			return err
		}
		return b(cc)
	}
}

// oneSpool is the usage error of a --store that names a directory other
// than the --spool given beside it (flag or FARRO_SPOOL), as the daemons
// refuse it: which of the two was meant cannot be guessed.
func oneSpool(cc *cli.Context) error {
	st := storeFor(cc)
	if st == "" || store.IsPostgresURL(st) {
		return nil
	}
	sp, given := localFlag(cc, daemon.SpoolFlag.Name)
	if !given {
		sp, given = os.Getenv("FARRO_SPOOL"), os.Getenv("FARRO_SPOOL") != ""
	}
	if given && filepath.Clean(sp) != filepath.Clean(st) {
		return ctl.Usagef("--store and --spool name two different spools (%q, %q): give one", st, sp)
	}
	return nil
}

// oneSpoolNotOnStore is the check of a spool-only command.
func oneSpoolNotOnStore(cc *cli.Context) error {
	if err := oneSpool(cc); err != nil {
		return err
	}
	return refuseOnStore(cc)
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
