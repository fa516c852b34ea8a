package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/daemon"
)

// exitStatuses are farroctl's exit statuses (internal/ctl), for --help
// and the man page alike.
func exitStatuses() []daemon.ExitStatus {
	return []daemon.ExitStatus{
		{Code: ctl.ExitOK, Text: "success (fsck: the spool is clean, or --repair fixed every finding)"},
		{Code: ctl.ExitFail, Text: "operational error: job not found, duplicate ID, busy lock, I/O error, some of several IDs failed, fsck findings left"},
		{Code: ctl.ExitUsage, Text: "usage error or invalid input: unknown flag or command, unsafe ID, invalid or oversized prompt, unknown kind or state"},
	}
}

// description is farroctl's DESCRIPTION (--help and the man page), with
// this build's paths: a packaged build names the installed documentation.
func description() string {
	var b strings.Builder
	b.WriteString("Flags go before arguments, and --spool before the command.\n\nExit codes:\n")
	for _, e := range exitStatuses() {
		for i, line := range wrap(e.Text, 66) {
			if i == 0 {
				fmt.Fprintf(&b, "   %d  %s\n", e.Code, line)
			} else {
				fmt.Fprintf(&b, "      %s\n", line)
			}
		}
	}
	fmt.Fprintf(&b, "\nErrors go to stderr, one line each, prefixed \"farroctl: \". See %s.", daemon.DocPath("docs/FARROCTL.md"))
	return b.String()
}

// wrap breaks s into lines of at most width bytes at spaces (a longer
// word has a line of its own).
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) > width:
			lines = append(lines, line)
			line = w
		default:
			line += " " + w
		}
	}
	return append(lines, line)
}

// spoolFlag is farroctl's --spool: the daemons' flag, whose usage names
// the environment file farroctl also reads in a packaged build
// (daemon.SpoolFor).
func spoolFlag() cli.Flag {
	f := *daemon.SpoolFlag
	if daemon.EnvFile != "" {
		f.Usage += " (else FARRO_SPOOL, else FARRO_SPOOL in " + daemon.EnvFile + ")"
	}
	return &f
}

// manPage is what farroctl's man page says beyond its commands and flags.
func manPage() *daemon.ManPage {
	envFile := daemon.EnvFile
	if envFile == "" {
		envFile = daemon.PackagedEnvFile
	}
	return &daemon.ManPage{
		Exit: exitStatuses(),
		Signals: []daemon.ManEntry{
			{Tag: "q, Q, Ctrl-C (SIGINT), SIGTERM", Text: "quit farroctl top's live view; the terminal is restored"},
			{Tag: "SIGINT, SIGTERM", Text: "end any other command at once (the default action; farroctl serve first finishes the requests under way, for at most 5 s). A job changes state by one atomic rename, so it is never half-moved; a job lock left by an interrupted action is recovered by watchdogd, a half-built submission in tmp/ is swept by managerd"},
		},
		EnvNote: "Without --spool and FARRO_SPOOL, farroctl takes FARRO_SPOOL from " + envFile + " (a packaged build), else uses " + daemon.DefaultSpool + ". With --store postgres://USER@HOST:PORT/DB (else FARRO_STORE), submit, ls, show, stats, history, migrate, import and the job actions work on that PostgreSQL database instead; every other command refuses it (exit 2).",
		Files: []daemon.ManEntry{
			{Tag: daemon.DefaultSpool, Text: "the spool, --spool's default; its layout is described in " + daemon.DocPath("spool/README.md")},
			{Tag: daemon.DefaultSpool + "/events/*.jsonl", Text: "the spool-wide event stream, a segment per UTC hour: farroctl's actions append their audit line to it; farroctl events reads it"},
			{Tag: daemon.DefaultSpool + "/paused/", Text: "paused job kinds (farroctl pause, resume, paused)"},
			{Tag: daemon.DefaultSpool + "/agents/", Text: "the registry of running agents and daemons (farroctl agents, top)"},
			{Tag: envFile, Text: "the settings the systemd units read; farroctl reads FARRO_SPOOL from it"},
			{Tag: "/lib/systemd/system/farro.target, agentd@.service, managerd.service, watchdogd.service", Text: "the units of the daemons (the Debian package); farro-pipeline.timer runs farroctl pipeline"},
		},
	}
}
