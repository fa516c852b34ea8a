package main

import (
	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
)

// movingCommands are farroctl export and import: moving a queue from a
// spool into a PostgreSQL store (docs/POSTGRES.md).
func movingCommands(c func(*cli.Context) *ctl.Ctl, usageErr cli.OnUsageErrorFunc) []*cli.Command {
	return []*cli.Command{{
		Name:      "export",
		Usage:     "write the jobs (fields, prompt, history) of the spool or of the database (--store URL) as JSON Lines, for farroctl import",
		ArgsUsage: " ",
		Description: `Writes one JSON object per job of the spool (or of the --state states): its
job.json fields, its prompt exactly as stored, its history (events.jsonl), the
format version (farro_export) and the time of the export; nothing of the
spool's directories, locks or control files. A job that is running
(in-progress) is written as it is, with its claim, and marked "running": import
makes it stale. With -o FILE the file is written whole or not at all (a temp
file beside it, fsynced, then renamed); else stdout. A job that cannot be read
(a symlink or file where a job must be, an unreadable job.json or prompt.json)
is reported on one line and left out, the others are written, and the exit
status is 1; unreadable lines of a history are left out of it, with a warning. Export a drained spool (stop submits,
pause the kinds or stop agentd with --drain): what changes meanwhile is not
followed. With --store postgres://... (or FARRO_STORE) it exports the
database's jobs in the same format, state by state, a page at a time (a
database to another with import, or a copy of the queue in farro's own
format beside pg_dump); a job removed while the export runs is left out.`,
		OnUsageError: usageErr,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "state", Usage: "only jobs in state `S` (repeatable or comma-separated): queued, deferred, held, in-progress, stale, failed, succeeded, killed"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "-", Usage: "write to `FILE` (- is stdout)"},
		},
		Action: func(cc *cli.Context) error {
			if cc.Args().Present() {
				return ctl.Usagef("export takes no arguments (-o FILE names its output)")
			}
			return c(cc).Export(ctl.ExportOptions{States: cc.StringSlice("state"), Output: cc.String("output")})
		},
	}, {
		Name:      "import",
		Usage:     "insert the jobs farroctl export wrote into the PostgreSQL store, as they are (--store URL)",
		ArgsUsage: "[FILE|-]",
		Description: `Reads farroctl export's lines (FILE, or stdin) and inserts each job into the
database named by --store (or FARRO_STORE) with its state, attempts, times,
prompt and history as they were, one transaction per job: not as a new
submission. A job already in the database with the same content is skipped
and counted, so an interrupted import run again finishes the rest; one with
the same ID and other content is a conflict, reported with its line and left
as it is. A job that was running on the spool is imported as stale (its claim
stays with its agent on the old spool; managerd requeues it), and each is
named on stdout. A corrupt line, a line of another format version, a job the
database refuses (an unknown state) or a line longer than the limit (skipped
without being kept in memory) is reported on one line with its number; the
rest is imported. Prints what it did; exit 1 after conflicts or refused lines. A
failure of the database stops it (run it again).`,
		OnUsageError: usageErr,
		Action: func(cc *cli.Context) error {
			if cc.Args().Len() > 1 {
				return ctl.Usagef("import takes at most one FILE, got %d", cc.Args().Len())
			}
			return c(cc).Import(cc.Args().First())
		},
	}}
}
