package pg

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	farro "github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/testpg"
)

// Every daemon given a database that was never migrated refuses to start
// with one line that says to run farroctl migrate, and exit status 152
// (a configuration error the units do not restart), at start and with
// --check-config; once migrated, --check-config says the configuration
// is OK.
func TestDaemonsRefuseAnUnmigratedDatabase(t *testing.T) {
	url := testpg.NewDatabase(t, testpg.Start(t))
	run := func(name string, args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(filepath.Join(bins.Dir(t), name), args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Env = append(cmd.Environ(), "FARRO_STORE=", "FARRO_SPOOL=")
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	daemons := map[string][]string{"agentd": {"--id", "w1"}, "managerd": nil, "watchdogd": nil}
	for name, extra := range daemons {
		for _, check := range []bool{false, true} {
			args := append([]string{"--store", url, "--spool", t.TempDir()}, extra...)
			if check {
				args = append(args, "--check-config")
			}
			code, _, stderr := run(name, args...)
			if code != farro.ExitConfig || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "run farroctl migrate") {
				t.Errorf("%s %v: exit %d, stderr %q; want %d and one line saying to migrate", name, args, code, stderr, farro.ExitConfig)
			}
		}
	}
	if out, err := exec.Command(filepath.Join(bins.Dir(t), "farroctl"), "migrate", "--store", url).CombinedOutput(); err != nil {
		t.Fatalf("farroctl migrate: %v\n%s", err, out)
	}
	for name, extra := range daemons {
		code, stdout, stderr := run(name, append([]string{"--store", url, "--spool", t.TempDir(), "--check-config"}, extra...)...)
		if code != 0 || stdout != name+": configuration OK\n" {
			t.Errorf("%s --check-config, migrated: exit %d, stdout %q, stderr %q", name, code, stdout, stderr)
		}
	}
}
