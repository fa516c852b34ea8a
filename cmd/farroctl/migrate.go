package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
)

// migrateCommands is farroctl migrate: the PostgreSQL store's schema.
func migrateCommands(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) []*cli.Command {
	return []*cli.Command{{
		Name:      "migrate",
		Usage:     "apply the PostgreSQL store's pending schema migrations (--status: only report the version)",
		ArgsUsage: " ",
		Description: `Applies, in order, each schema migration of this build that the database named by
--store (or FARRO_STORE) lacks, each in one transaction with its version row,
and prints the version before and after. Running it again changes nothing; two
at once apply each migration once. A database whose schema is newer than this
build knows is refused and left alone (upgrade farro). With --status nothing is
changed: it prints the database's version and this build's, and exits 1 when
they differ. A spool needs no migration.`,
		OnUsageError: usageErr,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "status", Usage: "only report the database's schema version against this build's (exit 1 when they differ)"}},
		Action: func(cc *cli.Context) error {
			if cc.Args().Present() {
				return ctl.Usagef("migrate takes no arguments")
			}
			return c(cc).Migrate(storeFor(cc), cc.Bool("status"))
		},
	}}
}
