package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

func TestMain(m *testing.M) { testpg.Main(m) }

// storeApp runs a daemon with args and returns what its action saw: the
// spool and StoreURL, and the error.
func storeApp(t *testing.T, args ...string) (spool, url string, err error) {
	t.Helper()
	ran := false
	app, _, _ := configApp(t, &ran)
	app.Action = func(c *cli.Context) error {
		spool, url = c.String(SpoolFlag.Name), StoreURL(c)
		return nil
	}
	err = Run(app, append([]string{"testd", "--id", "w1"}, args...))
	return spool, url, err
}

// --store: a postgres:// URL is the store, and leaves --spool to name the
// local directory; anything else names the spool, as --spool does, and
// must not disagree with --spool. Without it, --spool alone, as before.
func TestStoreFlag(t *testing.T) {
	clearTestEnv(t)
	dir := t.TempDir()
	spool, url, err := storeApp(t, "--spool", dir)
	if err != nil || spool != dir || url != "" {
		t.Errorf("--spool alone: spool %q url %q err %v", spool, url, err)
	}
	const pg = "postgres://farro@db.example:5432/farro"
	spool, url, err = storeApp(t, "--spool", dir, "--store", pg)
	if err != nil || spool != dir || url != pg {
		t.Errorf("--store URL: spool %q url %q err %v", spool, url, err)
	}
	spool, url, err = storeApp(t, "--store", "postgresql://h/db")
	if err != nil || spool != DefaultSpool || url != "postgresql://h/db" {
		t.Errorf("--store postgresql:// URL: spool %q url %q err %v", spool, url, err)
	}
	spool, url, err = storeApp(t, "--store", dir)
	if err != nil || spool != dir || url != "" {
		t.Errorf("--store DIR: spool %q url %q err %v", spool, url, err)
	}
	_, _, err = storeApp(t, "--store", dir, "--spool", filepath.Join(dir, "other"))
	if !IsConfigError(err) || !strings.Contains(err.Error(), "two different spools") || strings.Contains(err.Error(), "\n") {
		t.Errorf("--store DIR and another --spool: %v, want a one-line configuration error", err)
	}
	t.Setenv("FARRO_STORE", pg)
	spool, url, err = storeApp(t, "--spool", dir)
	if err != nil || spool != dir || url != pg {
		t.Errorf("FARRO_STORE: spool %q url %q err %v", spool, url, err)
	}
}

// OpenPostgres refuses a database that was never migrated with a one-line
// configuration error (exit ExitConfig), and opens a migrated one with
// its attempts working under the local directory.
func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testpg.NewDatabase(t, testpg.Start(t))
	local := t.TempDir()
	_, err := OpenPostgres(ctx, url, local)
	if !IsConfigError(err) || !errors.Is(err, pgstore.ErrNotMigrated) || ExitCode(err) != ExitConfig || strings.Contains(err.Error(), "\n") {
		t.Fatalf("not migrated: %v (exit %d), want a one-line configuration error", err, ExitCode(err))
	}
	if _, err := pgstore.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	s, err := OpenPostgres(ctx, url, local)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, errs := s.Submit(ctx, []job.SubmitRequest{{ID: "job-1", Kind: "noop", Prompt: []byte(`{}`)}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	cs, err := s.Claim(ctx, job.Holder{Actor: "agentd/w1", Agent: "w1"}, store.ClaimOptions{Max: 1})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %v %d", err, len(cs))
	}
	if want := filepath.Join(local, ScratchDir, "w1", "job-1"); cs[0].Dir() != want {
		t.Errorf("attempt dir %q, want %q", cs[0].Dir(), want)
	}
	if fi, err := os.Stat(cs[0].Dir()); err != nil || !fi.IsDir() {
		t.Errorf("attempt dir: %v", err)
	}
}
