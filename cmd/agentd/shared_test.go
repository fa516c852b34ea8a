package main

import (
	"io"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/daemon"
)

// --lease must outlast --heartbeat with a PostgreSQL store (every claim
// would be lost between two renewals); on a spool it is not used, and a
// long --heartbeat stays valid as before.
func TestLeaseFlag(t *testing.T) {
	t.Setenv("FARRO_STORE", "")
	check := func(args ...string) error {
		app := newApp()
		app.Writer, app.ErrWriter = io.Discard, io.Discard
		return daemon.Run(app, append([]string{"agentd", "--check-config", "--id", "w1", "--spool", t.TempDir()}, args...))
	}
	err := check("--store", "postgres://farro@127.0.0.1:1/farro", "--heartbeat", "2s", "--lease", "2s")
	if !daemon.IsConfigError(err) || !strings.Contains(err.Error(), "--lease 2s: must be longer than --heartbeat") {
		t.Errorf("lease = heartbeat: %v, want a configuration error", err)
	}
	err = check("--store", "postgres://farro@127.0.0.1:1/farro", "--lease", "0s")
	if !daemon.IsConfigError(err) || !strings.Contains(err.Error(), "--lease 0s: must be positive") {
		t.Errorf("lease 0: %v, want a configuration error", err)
	}
	if err := check("--heartbeat", "60s"); err != nil {
		t.Errorf("spool, --heartbeat 60s (longer than the default lease): %v", err)
	}
}
