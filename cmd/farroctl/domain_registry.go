package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
)

// The spool's domain registry on the command line (internal/ctl,
// domain_registry.go): domains --registry, domains migrate, and domain
// show / reset with the domain alone.

// registryFlag is domains --registry.
var registryFlag = &cli.BoolFlag{Name: "registry", Usage: "list the spool's domain registry (one entry per domain, shared by every crawl: status, cooldown, lifetime counters, the crawls that know it) instead of the crawls' tables"}

// domainsMigrateCommand is domains migrate.
func domainsMigrateCommand(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "build the domain registry from the crawls' domain files (managerd does it at its first start on a spool without one); the most restrictive status wins, the latest among equals",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "print what would be written, write nothing"},
		},
		OnUsageError: usageErr,
		Action: func(cc *cli.Context) error {
			if cc.Args().Present() {
				return ctl.Usagef("domains migrate takes no arguments")
			}
			return c(cc).DomainsMigrate(cc.Bool("dry-run"))
		},
	}
}

// domainArgs takes DOMAIN (the registry) or NAME DOMAIN (a crawl).
func domainArgs(cc *cli.Context) ([]string, error) {
	args, err := absorbFlags(cc)
	if err != nil {
		return nil, err
	}
	if len(args) != 1 && len(args) != 2 {
		return nil, ctl.Usagef("%s: want DOMAIN or NAME DOMAIN, got %d argument(s) (see --help)", cc.Command.Name, len(args))
	}
	return args, nil
}
