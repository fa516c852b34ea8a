package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/testpg"
)

func TestMain(m *testing.M) { testpg.Main(m) }

func farroctl(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(append([]string{"farroctl"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// farroctl migrate takes its database from --store or FARRO_STORE, the
// flag first; without either it is a usage error.
func TestMigrateWiring(t *testing.T) {
	url := testpg.NewDatabase(t, testpg.Start(t))
	t.Setenv("FARRO_STORE", "")
	if code, _, stderr := farroctl("migrate"); code != 2 || !strings.Contains(stderr, "--store") {
		t.Fatalf("migrate without a store: exit %d, %q", code, stderr)
	}
	t.Setenv("FARRO_STORE", url)
	if code, stdout, stderr := farroctl("migrate", "--status"); code != 1 || !strings.Contains(stdout, "no farro schema") {
		t.Fatalf("migrate --status (FARRO_STORE) before migrating: exit %d, %q %q", code, stdout, stderr)
	}
	if code, stdout, stderr := farroctl("migrate"); code != 0 || !strings.Contains(stdout, "schema version 0 -> ") {
		t.Fatalf("migrate (FARRO_STORE): exit %d, %q %q", code, stdout, stderr)
	}
	t.Setenv("FARRO_STORE", "postgres://nobody@127.0.0.1:1/none?connect_timeout=5")
	if code, stdout, stderr := farroctl("migrate", "--status", "--store", url); code != 0 || !strings.Contains(stdout, "up to date") {
		t.Fatalf("migrate --status --store (over FARRO_STORE): exit %d, %q %q", code, stdout, stderr)
	}
	if code, _, stderr := farroctl("migrate"); code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.HasPrefix(stderr, "farroctl: migrate: 127.0.0.1:1/none: ") {
		t.Fatalf("migrate of an unreachable database: exit %d, %q", code, stderr)
	}
}
