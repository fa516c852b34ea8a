package main

import (
	"io"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/daemon/mantest"
	"github.com/farro-dev/farro/internal/registry"
)

// managerd's man page: every section, every default, the daemons' exit
// statuses, signals and files.
func TestManPage(t *testing.T) {
	page := mantest.Check(t, newApp(io.Discard, io.Discard), 0, 1, registry.ExitAlreadyRunning, daemon.ExitConfig)
	for _, want := range []string{
		`(default: 3)`, `(default: 5m)`, `(default: 168h)`, `(default: 0s)`, `(default: true)`, `(default: 10000)`, `\fBFARRO_DOMAIN_CACHE\fP`,
		`a second SIGTERM or SIGINT`, `/lib/systemd/system/managerd.service`, `/etc/farro/managerd.env`, `\fBFARRO_RESCAN\fP`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("managerd's man page lacks %q", want)
		}
	}
}
