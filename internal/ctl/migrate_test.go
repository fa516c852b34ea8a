package ctl_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

func TestMain(m *testing.M) { testpg.Main(m) }

func migrateCtl() (*ctl.Ctl, *bytes.Buffer) {
	var out bytes.Buffer
	return &ctl.Ctl{Stdout: &out, Stderr: &bytes.Buffer{}}, &out
}

// farroctl migrate brings a fresh database to this build's schema and
// says from which version to which; again, it changes nothing; --status
// reports the version and fails while migrations are pending.
func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	url := testpg.NewDatabase(t, testpg.Start(t))
	build := pgstore.SchemaVersion()

	c, out := migrateCtl()
	err := c.Migrate(url, true)
	if ctl.ExitCode(err) != ctl.ExitFail || !ctl.IsSilent(err) || !strings.Contains(out.String(), "no farro schema") || !strings.Contains(out.String(), "run farroctl migrate") {
		t.Fatalf("status of an empty database: %v, %q", err, out)
	}

	c, out = migrateCtl()
	if err := c.Migrate(url, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "applied 0001_jobs.sql\n") || !strings.Contains(out.String(), fmt.Sprintf("schema version 0 -> %d\n", build)) {
		t.Fatalf("first migrate printed %q", out)
	}
	if strings.Contains(out.String(), "farro@") {
		t.Fatalf("output names the user: %q", out)
	}

	c, out = migrateCtl()
	if err := c.Migrate(url, false); err != nil {
		t.Fatal(err)
	}
	if out.String() != fmt.Sprintf("%s: schema version %d, up to date\n", hostDB(t, url), build) {
		t.Fatalf("second migrate printed %q", out)
	}

	c, out = migrateCtl()
	if err := c.Migrate(url, true); err != nil || !strings.Contains(out.String(), "up to date") {
		t.Fatalf("status after migrate: %v, %q", err, out)
	}

	// A newer schema: refused, one line, nothing changed.
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `INSERT INTO farro_schema_version (version, name) VALUES ($1, 'next.sql')`, build+1); err != nil {
		t.Fatal(err)
	}
	c, _ = migrateCtl()
	err = c.Migrate(url, false)
	if ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(err.Error(), "upgrade farro") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("migrate of a newer schema: %v", err)
	}
	c, out = migrateCtl()
	if err := c.Migrate(url, true); ctl.ExitCode(err) != ctl.ExitFail || !strings.Contains(out.String(), "newer than this build knows") {
		t.Fatalf("status of a newer schema: %v, %q", err, out)
	}
}

// hostDB is how farroctl names the database at url.
func hostDB(t *testing.T, url string) string {
	t.Helper()
	i := strings.Index(url, "@")
	j := strings.Index(url, "?")
	return url[i+1 : j]
}

// Without a database, or with a spool path, migrate is a usage error.
func TestMigrateUsage(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"", "/var/lib/farro/spool"} {
		c, out := migrateCtl()
		err := c.Migrate(url, false)
		if ctl.ExitCode(err) != ctl.ExitUsage || strings.Contains(err.Error(), "\n") || out.Len() != 0 {
			t.Errorf("migrate --store %q: %v, %q", url, err, out)
		}
	}
}
