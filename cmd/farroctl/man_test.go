package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/daemon/mantest"
)

// farroctl's man page: every section, every command's flags with their
// defaults, its exit statuses (internal/ctl), top's keys, and the
// placeholders of the descriptions ("agents/<id>.lock") kept.
func TestManPage(t *testing.T) {
	var out bytes.Buffer
	page := mantest.Check(t, newApp(strings.NewReader(""), &out, &out), ctl.ExitOK, ctl.ExitFail, ctl.ExitUsage)
	for _, want := range []string{
		"agents/<id>.lock", ".SS\ntop\n", ".SS\ncrawl start", "q, Q, Ctrl\\-C", "(default: 2s)",
		"events/*.jsonl", "paused/", "/etc/farro/farro.env",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("farroctl's man page lacks %q", want)
		}
	}
	// The per-command copies of --spool are the global one: listed once.
	if n := strings.Count(page, "\\fB\\-\\-spool\\fP"); n != 1 {
		t.Errorf("--spool listed %d times", n)
	}
	// --help gives the same exit statuses.
	for _, e := range exitStatuses() {
		if !strings.Contains(description(), "   "+string(rune('0'+e.Code))+"  ") {
			t.Errorf("--help lacks exit status %d", e.Code)
		}
	}
}
