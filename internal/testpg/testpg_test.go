package testpg

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func query(t *testing.T, url, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// The server is durable like a deployment's, on loopback, and each test
// gets a database of its own that is dropped when it ends.
func TestStartAndNewDatabase(t *testing.T) {
	url := Start(t)
	if !strings.Contains(url, "@127.0.0.1:") {
		t.Fatalf("server url %q is not on loopback", url)
	}
	for _, setting := range []string{"fsync", "synchronous_commit"} {
		if v := query(t, url, "SHOW "+setting); v != "on" {
			t.Errorf("%s = %s, want on", setting, v)
		}
	}
	if v := query(t, url, "SHOW listen_addresses"); v != "127.0.0.1" {
		t.Errorf("listen_addresses = %s", v)
	}
	if Start(t) != url {
		t.Fatal("a second Start started another server")
	}
	var names []string
	t.Run("two", func(t *testing.T) {
		a, b := NewDatabase(t, url), NewDatabase(t, url)
		names = []string{query(t, a, "SELECT current_database()"), query(t, b, "SELECT current_database()")}
		if names[0] == names[1] || names[0] == "postgres" {
			t.Fatalf("databases %q are not fresh and distinct", names)
		}
	})
	for _, n := range names {
		if got := query(t, url, "SELECT count(*)::text FROM pg_database WHERE datname = '"+n+"'"); got != "0" {
			t.Errorf("database %s was not dropped at the test's end", n)
		}
	}
}

// Without the binaries there is no skip: a one-line error saying what
// to install.
func TestNotInstalledSaysWhatToInstall(t *testing.T) {
	old := binGlob
	binGlob = "/nonexistent/postgresql/*/bin/postgres"
	defer func() { binGlob = old }()
	_, err := StartServer(t.TempDir())
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "apt-get install postgresql") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v", err)
	}
}

// A server crashed by Kill (every process SIGKILLed) comes back with
// Restart on the same port, with every committed row.
func TestKillAndRestartKeepCommittedRows(t *testing.T) {
	s := StartPrivate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	s.Kill()
	// The backends got SIGKILL with the postmaster; one may still be on
	// its way out when Kill returns: its connection must fail soon.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a connection to a killed server still works")
		}
	}
	_ = conn.Close(context.Background())
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid {
		t.Fatal("Restart did not start a new postmaster")
	}
	if got := query(t, s.URL, "SELECT v::text FROM t"); got != "42" {
		t.Fatalf("after a crash and restart, t holds %q, want 42", got)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart of a running server did not fail")
	}
}

// StartServerWith passes more settings to the server (a probe preloads
// pg_stat_statements), and refuses one that would change durability.
func TestStartServerWithSettings(t *testing.T) {
	for _, bad := range []string{"fsync=off", "synchronous_commit=off", "work_mem"} {
		if _, err := StartServerWith(t.TempDir(), bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("setting %q: err = %v, want a one-line refusal", bad, err)
		}
	}
	dir, err := os.MkdirTemp("", "farro-testpg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s, err := StartServerWith(dir, "shared_preload_libraries=pg_stat_statements", "application_name=farro-probe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if v := query(t, s.URL, "SHOW shared_preload_libraries"); v != "pg_stat_statements" {
		t.Errorf("shared_preload_libraries = %q", v)
	}
	if v := query(t, s.URL, "SHOW synchronous_commit"); v != "on" {
		t.Errorf("synchronous_commit = %q", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
		t.Fatal(err)
	}
	if v := query(t, s.URL, "SELECT (count(*) > 0)::text FROM pg_stat_statements"); v != "true" {
		t.Errorf("pg_stat_statements counts nothing: %s", v)
	}
}
