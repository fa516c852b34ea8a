package main

import (
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/internal/daemon/mantest"
	"github.com/farro-dev/farro/internal/registry"
)

// agentd's man page: every section, every default, its own exit status
// (the unusable handler), the drain timeout, the handler's environment,
// and "<id>" kept.
func TestManPage(t *testing.T) {
	t.Parallel()
	page := mantest.Check(t, newApp(), 0, 1, registry.ExitAlreadyRunning, agent.ExitHandlerUnusable, daemon.ExitConfig)
	for _, want := range []string{
		`in\-progress/<id>/`, `stdout.<N>.log`, `(default: 30s)`, `(default: 1h)`,
		`\-\-drain\-timeout to finish`, `FARRO_JOB_ID`, `/lib/systemd/system/agentd@.service`,
		`/etc/farro/farro.env`, `events/*.jsonl`, `paused/<kind>`, `agents/`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("agentd's man page lacks %q", want)
		}
	}
}
