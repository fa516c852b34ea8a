package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/testpg"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

func farroctlIn(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(append([]string{"farroctl"}, args...), strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// --store is farroctl's, before or after any command; FARRO_STORE stands
// in for it, and the flag wins over it. A directory in --store is the
// spool.
func TestStoreWiring(t *testing.T) {
	url := testpg.NewDatabase(t, testpg.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pgstore.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FARRO_SPOOL", filepath.Join(t.TempDir(), "no-spool"))
	t.Setenv("FARRO_STORE", url)
	if code, stdout, stderr := farroctlIn(`{"a":1}`, "submit", "--id", "envjob", "--kind", "noop"); code != 0 || stdout != "envjob\n" {
		t.Fatalf("submit (FARRO_STORE): exit %d, %q %q", code, stdout, stderr)
	}
	unreachable := "postgres://nobody@127.0.0.1:1/none?connect_timeout=5"
	t.Setenv("FARRO_STORE", unreachable)
	if code, stdout, stderr := farroctlIn("", "ls", "--store", url); code != 0 || !strings.Contains(stdout, "envjob") || !strings.Contains(stdout, "noop") {
		t.Fatalf("ls --store (over FARRO_STORE): exit %d, %q %q", code, stdout, stderr)
	}
	if code, stdout, stderr := farroctlIn("", "--store", url, "show", "envjob"); code != 0 || !strings.Contains(stdout, `"prompt": {`) {
		t.Fatalf("--store before show: exit %d, %q %q", code, stdout, stderr)
	}
	if code, stdout, stderr := farroctlIn("", "hold", "envjob", "--store", url); code != 0 || stdout != "envjob: queued -> held\n" {
		t.Fatalf("hold --store: exit %d, %q %q", code, stdout, stderr)
	}
	if code, _, stderr := farroctlIn("", "stats"); code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.HasPrefix(stderr, "farroctl: 127.0.0.1:1/none: ") {
		t.Fatalf("stats of an unreachable FARRO_STORE: exit %d, %q", code, stderr)
	}

	// Spool-only commands refuse a database before connecting to it.
	for _, tc := range []struct{ args, want []string }{
		{[]string{"init"}, []string{"farroctl: init works on a spool only for now", "farroctl migrate creates the schema"}},
		{[]string{"crawl", "status", "c1"}, []string{"farroctl: crawl status works on a spool only for now"}},
	} {
		code, stdout, stderr := farroctlIn("", tc.args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v on a database: exit %d, %q %q", tc.args, code, stdout, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v on a database: %q lacks %q", tc.args, stderr, w)
			}
		}
	}
	// fsck, metrics, logs and the completion's job IDs work on a database.
	if code, stdout, stderr := farroctlIn("", "--store", url, "fsck"); code != 0 || stdout != "fsck: clean\n" {
		t.Errorf("fsck on a database: exit %d, %q %q", code, stdout, stderr)
	}
	if code, stdout, stderr := farroctlIn("", "--store", url, "metrics"); code != 0 || !strings.Contains(stdout, `farro_jobs{state="held"} 1`) {
		t.Errorf("metrics on a database: exit %d, %q %q", code, stdout, stderr)
	}
	if code, stdout, stderr := farroctlIn("", "logs", "envjob", "--store", url); code != 1 || stdout != "" || stderr != "farroctl: envjob: no output yet (held, it has not run)\n" {
		t.Errorf("logs on a database: exit %d, %q %q", code, stdout, stderr)
	}
	if code, stdout, stderr := farroctlIn("", "--store", url, "__jobids", "show", "env"); code != 0 || stdout != "envjob\n" {
		t.Errorf("__jobids on a database: exit %d, %q %q", code, stdout, stderr)
	}
	// serve works on a database: one that does not answer at start is
	// one line naming it, exit 1, and nothing listens.
	if code, stdout, stderr := farroctlIn("", "serve", "--listen", "127.0.0.1:0"); code != 1 || stdout != "" ||
		strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.HasPrefix(stderr, "farroctl: 127.0.0.1:1/none: ") {
		t.Errorf("serve of an unreachable FARRO_STORE: exit %d, %q %q", code, stdout, stderr)
	}
	if code, stdout, _ := farroctlIn("", "completion", "bash"); code != 0 || stdout == "" {
		t.Errorf("completion with FARRO_STORE set: exit %d", code)
	}

	// A directory in --store is the spool, as with --spool.
	spool := filepath.Join(t.TempDir(), "spool")
	t.Setenv("FARRO_STORE", "")
	t.Setenv("FARRO_SPOOL", "")
	if code, _, stderr := farroctlIn("", "init", spool); code != 0 {
		t.Fatalf("init: %d %q", code, stderr)
	}
	if code, stdout, stderr := farroctlIn(`{}`, "--store", spool, "submit", "--id", "spooljob"); code != 0 || stdout != "spooljob\n" {
		t.Fatalf("submit --store DIR: exit %d, %q %q", code, stdout, stderr)
	}
	if code, stdout, stderr := farroctlIn("", "ls", "--spool", spool); code != 0 || !strings.Contains(stdout, "spooljob") {
		t.Fatalf("ls --spool after submit --store DIR: exit %d, %q %q", code, stdout, stderr)
	}
	if code, stdout, stderr := farroctlIn("", "ls", "--store", spool+"/", "--spool", spool); code != 0 || !strings.Contains(stdout, "spooljob") {
		t.Fatalf("ls with --store and --spool naming one spool: exit %d, %q %q", code, stdout, stderr)
	}
	// Two different directories: which was meant cannot be guessed.
	for _, args := range [][]string{
		{"--store", spool, "ls", "--spool", t.TempDir()},
		{"--spool", t.TempDir(), "submit", "--store", spool},
	} {
		code, stdout, stderr := farroctlIn(`{}`, args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "name two different spools") {
			t.Errorf("%v: exit %d, %q %q", args, code, stdout, stderr)
		}
	}
	t.Setenv("FARRO_SPOOL", t.TempDir())
	if code, _, stderr := farroctlIn("", "ls", "--store", spool); code != 2 || !strings.Contains(stderr, "name two different spools") {
		t.Errorf("--store DIR against another FARRO_SPOOL: exit %d, %q", code, stderr)
	}
}
