package ctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// MigrateTimeout bounds farroctl migrate (connecting, waiting for another
// migrator's lock, applying the migrations).
const MigrateTimeout = 5 * time.Minute

// storeName is how messages name the database at url: host, port and
// database, never the user's password.
func storeName(url string) string {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return "the database"
	}
	return fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
}

// Migrate is farroctl migrate: it applies the schema migrations the
// PostgreSQL store at url lacks and prints the versions before and after,
// or, with status, only reports the database's version against this
// build's (exit 1 when they differ).
func (c *Ctl) Migrate(url string, status bool) error {
	if url == "" {
		return Usagef("migrate needs the database: --store postgres://USER@HOST/DB (or FARRO_STORE)")
	}
	if !store.IsPostgresURL(url) {
		return Usagef("migrate: --store %q is not a postgres:// URL (a spool needs no migration)", url)
	}
	ctx, cancel := context.WithTimeout(context.Background(), MigrateTimeout)
	defer cancel()
	name := storeName(url)
	if status {
		db, build, err := pgstore.Status(ctx, url)
		if err != nil {
			return fmt.Errorf("migrate --status: %s: %s", name, oneLine(err.Error()))
		}
		switch {
		case db == build:
			fmt.Fprintf(c.Stdout, "%s: schema version %d, up to date (this build knows %d)\n", name, db, build)
			return nil
		case db == 0:
			fmt.Fprintf(c.Stdout, "%s: no farro schema (this build knows version %d): run farroctl migrate\n", name, build)
		case db < build:
			fmt.Fprintf(c.Stdout, "%s: schema version %d, %d migration(s) pending (this build knows %d): run farroctl migrate\n", name, db, build-db, build)
		default:
			fmt.Fprintf(c.Stdout, "%s: schema version %d is newer than this build knows (%d): upgrade farro\n", name, db, build)
		}
		return silent("migrate --status: %s is not at this build's schema version", name)
	}
	res, err := pgstore.Migrate(ctx, url)
	for _, m := range res.Applied {
		fmt.Fprintf(c.Stdout, "applied %s\n", m)
	}
	if err != nil {
		if errors.Is(err, pgstore.ErrSchemaNewer) {
			return fmt.Errorf("migrate: %s: %s (nothing changed)", name, oneLine(err.Error()))
		}
		return fmt.Errorf("migrate: %s: %s", name, oneLine(err.Error()))
	}
	if len(res.Applied) == 0 {
		fmt.Fprintf(c.Stdout, "%s: schema version %d, up to date\n", name, res.To)
		return nil
	}
	fmt.Fprintf(c.Stdout, "%s: schema version %d -> %d\n", name, res.From, res.To)
	return nil
}
