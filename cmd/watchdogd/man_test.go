package main

import (
	"io"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/daemon/mantest"
	"github.com/farro-dev/farro/internal/registry"
)

// watchdogd's man page: every section, every default, the daemons' exit
// statuses, signals and files.
func TestManPage(t *testing.T) {
	page := mantest.Check(t, newApp(io.Discard, io.Discard), 0, 1, registry.ExitAlreadyRunning, daemon.ExitConfig)
	for _, want := range []string{
		`(default: 500ms)`, `(default: 30s)`,
		`a second SIGTERM or SIGINT`, `/lib/systemd/system/watchdogd.service`, `/etc/farro/watchdogd.env`, `\fBFARRO_RESCAN\fP`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("watchdogd's man page lacks %q", want)
		}
	}
}
