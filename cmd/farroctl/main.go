// Command farroctl is farro's operator CLI: submit jobs, list and inspect
// them, hold/release/cancel/requeue/kill/retry/rm them, and check (and repair) the
// spool. The logic lives in internal/ctl; this file holds the flags and
// the wiring. See docs/FARROCTL.md.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/farro-dev/farro/internal/ctl"
	"github.com/farro-dev/farro/internal/daemon"
)

func main() {
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newApp(stdin, stdout, stderr)
	err := app.Run(intersperse(app, args))
	if err != nil && !ctl.IsSilent(err) {
		fmt.Fprintf(stderr, "farroctl: %v\n", err)
	}
	return ctl.ExitCode(err)
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	c := func(cc *cli.Context) *ctl.Ctl {
		c := newCtl(cc)
		c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
		return c
	}
	usageErr := func(cc *cli.Context, err error, _ bool) error {
		err = durationHint(cc, err)
		if name := cc.Command.Name; name != "" && name != cc.App.Name {
			return ctl.UsageError(fmt.Errorf("%s: %v (see farroctl %s --help)", name, err, name))
		}
		return ctl.UsageError(fmt.Errorf("%v (see farroctl --help)", err))
	}
	jsonFlag := func(usage string) cli.Flag { return &cli.BoolFlag{Name: "json", Usage: usage} }
	act := func(a ctl.Action, usage string) *cli.Command {
		return &cli.Command{
			Name: string(a), Usage: usage, ArgsUsage: actArgsUsage, OnUsageError: usageErr,
			Flags: append([]cli.Flag{
				&cli.StringFlag{Name: "reason", Usage: fmt.Sprintf("operator note appended to the job's reason (%q)", ctl.ReasonOf(a)+": NOTE")},
				&cli.DurationFlag{Name: "wait", Usage: "for a running job: wait up to this long for the outcome of the request (0: return once it is written)"},
			}, filterFlags()...),
			Action: func(cc *cli.Context) error {
				return c(cc).ActOn(a, cc.Args().Slice(), filterOf(cc), ctl.ActOptions{Note: cc.String("reason"), Wait: cc.Duration("wait")})
			},
		}
	}
	app := &cli.App{
		Name:            "farroctl",
		Usage:           "operate a farro spool: submit, inspect, control and check jobs",
		Version:         daemon.Version,
		Description:     description(),
		Flags:           []cli.Flag{spoolFlag(), globalStoreFlag()},
		Reader:          stdin,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		OnUsageError:    usageErr,
		ExitErrHandler:  func(*cli.Context, error) {}, // exit codes are decided in run
		Action: func(cc *cli.Context) error {
			if args := cc.Args(); args.First() == "help" {
				if args.Len() == 1 {
					return cli.ShowAppHelp(cc)
				}
				if err := cli.ShowCommandHelp(cc, args.Get(1)); err != nil {
					return ctl.Usagef("unknown command %q (see farroctl --help)", args.Get(1))
				}
				return nil
			} else if args.Present() {
				return ctl.Usagef("unknown command %q (see farroctl --help)", args.First())
			}
			_ = cli.ShowAppHelp(cc)
			return ctl.Usagef("no command given")
		},
		Commands: []*cli.Command{
			{
				Name:      "init",
				Usage:     "create a spool (DIR, else --spool): the directory and its layout; an existing spool is left as it is",
				ArgsUsage: "[DIR]",
				Description: `Every other command refuses a directory that is not a spool (one without
incoming/), so that a mistyped --spool is an error rather than a new, empty
queue. The daemons also make a spool of an existing empty directory (one
made by systemd-tmpfiles, say); init is for everything else.`,
				OnUsageError: usageErr,
				Action: func(cc *cli.Context) error {
					if cc.Args().Len() > 1 {
						return ctl.Usagef("init takes at most one directory")
					}
					return c(cc).Init(cc.Args().First())
				},
			},
			{
				Name:  "submit",
				Usage: "create a job from a JSON prompt (FILE, or stdin) and print its ID",
				Description: `The prompt must be one JSON document of at most 1 MiB; empty input is refused.
With --batch the input is JSON Lines, one job per line:
   {"id"?, "kind"?, "priority"?, "max_attempts"?, "not_before"?, "held"?, "prompt": {...}}
(absent fields take the flags' values); one ID is printed per job created, a refused
line is reported on stderr as "line N: reason", and the exit code is then 1.`,
				ArgsUsage:    "[FILE | -]",
				OnUsageError: usageErr,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "id", Usage: "job ID ([A-Za-z0-9][A-Za-z0-9._-]{0,127}); default: a generated, time-ordered ID"},
					&cli.StringFlag{Name: "kind", Value: ctl.DefaultKind, Usage: "handler kind: exec, noop or crawl.fetch"},
					&cli.IntFlag{Name: "priority", Usage: "higher runs first"},
					&cli.IntFlag{Name: "max-attempts", Usage: "attempts before the job is killed; 0 means managerd's --max-attempts"},
					&cli.DurationFlag{Name: "in", Usage: "start deferred: not before now + `DURATION`"},
					&cli.StringFlag{Name: "at", Usage: "start deferred: not before this `RFC3339` time (a past time queues at once)"},
					&cli.BoolFlag{Name: "held", Usage: "start held (paused) until farroctl release"},
					&cli.BoolFlag{Name: "batch", Usage: "read JSON Lines, one job per line"},
				},
				Action: func(cc *cli.Context) error {
					return c(cc).Submit(ctl.SubmitOptions{
						ID: cc.String("id"), Kind: cc.String("kind"), Priority: cc.Int("priority"),
						MaxAttempts: cc.Int("max-attempts"), In: cc.Duration("in"), At: cc.String("at"),
						Held: cc.Bool("held"), Batch: cc.Bool("batch"), Args: cc.Args().Slice(),
					})
				},
			},
			{
				Name:         "ls",
				Usage:        "list jobs (a table, or JSON Lines with --json)",
				OnUsageError: usageErr,
				Flags: []cli.Flag{
					&cli.StringSliceFlag{Name: "state", Usage: "only jobs in state `S` (repeatable or comma-separated): queued, deferred, held, in-progress, stale, failed, succeeded, killed"},
					jsonFlag("print JSON Lines: id, status, location, kind, priority, attempts, max_attempts, agent, created_at, updated_at, not_before, reason, error, dir, problem"),
				},
				Action: func(cc *cli.Context) error {
					if cc.Args().Present() {
						return ctl.Usagef("ls takes no arguments (use --state)")
					}
					return c(cc).List(ctl.ListOptions{States: cc.StringSlice("state"), JSON: cc.Bool("json")})
				},
			},
			{
				Name:         "show",
				Usage:        "print one job as JSON: job.json plus location, dir, lock, control and prompt",
				ArgsUsage:    "ID",
				OnUsageError: usageErr,
				Flags:        []cli.Flag{jsonFlag("accepted for symmetry with the other commands: show always prints JSON")},
				Action:       func(cc *cli.Context) error { return c(cc).Show(cc.Args().Slice()) },
			},
			{
				Name:  "stats",
				Usage: "count jobs per state and give the age of the oldest queued job; --ages: per-state age buckets (like qshape)",
				Description: `With --ages, a row per state (terminal ones included) counts its jobs (T)
and buckets them by the time since they entered the state: updated_at of
job.json, or started_at in in-progress (heartbeats refresh updated_at).
A job is in the first bucket whose edge its age does not exceed (1m, 5m,
10m, 20m, 40m, 80m, 160m, 320m, 640m), or in 640m+. A job whose job.json
cannot be read is counted in UNREADABLE (and T), in no bucket.`,
				OnUsageError: usageErr,
				Flags: []cli.Flag{
					jsonFlag("print one JSON document (with --ages: {state: {total, unreadable, buckets: [{le_seconds, count}]}}, le_seconds null for the last bucket)"),
					&cli.BoolFlag{Name: "ages", Usage: "per-state age buckets since each job entered its state (updated_at; started_at when in-progress)"},
				},
				Action: func(cc *cli.Context) error {
					if cc.Args().Present() {
						return ctl.Usagef("stats takes no arguments")
					}
					if cc.Bool("ages") {
						return c(cc).StatsAges(cc.Bool("json"))
					}
					return c(cc).Stats(cc.Bool("json"))
				},
			},
			{
				Name:  "agents",
				Usage: "list the agents (and managerd, watchdogd) registered in spool/agents/ (on a PostgreSQL store, its agents table): live or gone, pid, start time, slots, jobs held, last seen",
				Description: `Every agentd holds an flock on agents/<id>.lock while it runs (managerd and
watchdogd on agents/daemons/<name>.lock) and keeps agents/<id>.json fresh.
live: the flock is held; gone: nobody holds it (the record is the last one
written; "stopped" when the process exited cleanly). JOBS counts the job
directories in in-progress/<id>/.`,
				OnUsageError: usageErr,
				Flags:        []cli.Flag{jsonFlag("print one JSON document: {\"agents\": [...], \"daemons\": [...]}")},
				Action: func(cc *cli.Context) error {
					if cc.Args().Present() {
						return ctl.Usagef("agents takes no arguments")
					}
					return c(cc).Agents(ctl.AgentsOptions{JSON: cc.Bool("json")})
				},
			},
			act(ctl.Hold, "pause jobs: queued/deferred -> held; a running job is asked to stop and commit held"),
			act(ctl.Release, "resume held jobs: held -> queued"),
			act(ctl.Cancel, "cancel jobs: queued/deferred/held/failed/stale -> killed (\"cancelled\"); a running job is asked to stop"),
			act(ctl.Requeue, "retry jobs now: failed/stale/deferred -> queued (not_before cleared)"),
			act(ctl.Kill, "kill jobs: like cancel, with reason \"killed by operator\""),
			{
				Name: string(ctl.Retry), ArgsUsage: actArgsUsage, OnUsageError: usageErr,
				Usage: "run finished jobs again: killed (with --succeeded, succeeded too) -> queued, attempts reset to 0, ID, prompt and history kept",
				Flags: append([]cli.Flag{
					&cli.BoolFlag{Name: "succeeded", Usage: "retry succeeded jobs too (killed ones only otherwise)"},
				}, filterFlags()...),
				Action: func(cc *cli.Context) error {
					return c(cc).ActOn(ctl.Retry, cc.Args().Slice(), filterOf(cc), ctl.ActOptions{Succeeded: cc.Bool("succeeded")})
				},
			},
			{
				Name: string(ctl.Remove), ArgsUsage: actArgsUsage, OnUsageError: usageErr,
				Usage: "delete finished jobs (succeeded, killed) for good; other states are refused",
				Flags: filterFlags(),
				Action: func(cc *cli.Context) error {
					return c(cc).ActOn(ctl.Remove, cc.Args().Slice(), filterOf(cc), ctl.ActOptions{})
				},
			},
			{
				Name:  "fsck",
				Usage: "check the spool (on a PostgreSQL store: the database's jobs, leases and states) and print a plan; repair with --repair",
				Description: `Finds: jobs in two places (duplicate), orphan locks (dead owner, or no owner file
past --grace), live locks without a job, symlinks or files where jobs must be
(hostile), unreadable job.json, unknown schema versions, status that disagrees
with the directory, in-progress jobs without a lock, tmp/ leftovers and stray
temp files. Prints one line per finding: kind, id and path, detail, action.
Without --repair nothing is changed. With --repair: orphan locks are recovered,
mismatches reconciled, unreadable and hostile entries quarantined to corrupt/,
leftovers removed; duplicates, unknown schemas and live locks are only reported.
On a PostgreSQL store (--store URL) it checks the database instead: the schema
version, running jobs whose lease expired (past --grace) that recovery has not
taken, running jobs whose agent has no live row, holder fields that disagree with
the state, a last history event that disagrees with the state, and operator
requests no attempt will act on; paused kinds are listed as notes. With --repair
one recovery pass takes the expired leases, stale requests and stray leases are
cleared; the rest is only reported.
Exit 0 when clean or when every finding was repaired, else 1.`,
				OnUsageError: usageErr,
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "repair", Usage: "apply the plan"},
					jsonFlag("print one JSON object per finding"),
					&cli.DurationFlag{Name: "grace", Value: ctl.DefaultGrace, Usage: "leave ownerless locks, tmp/ entries and temp files younger than this alone (on a database: report and recover only leases expired longer ago than this)"},
				},
				Action: func(cc *cli.Context) error {
					if cc.Args().Present() {
						return ctl.Usagef("fsck takes no arguments")
					}
					return c(cc).Fsck(ctl.FsckOptions{Repair: cc.Bool("repair"), JSON: cc.Bool("json"), Grace: cc.Duration("grace")})
				},
			},
		},
	}
	app.Commands = append(app.Commands, crawlCommands(c, usageErr)...)
	app.Commands = append(app.Commands, opsCommands(c, usageErr)...)
	app.Commands = append(app.Commands, eventsCommands(c, usageErr)...)
	app.Commands = append(app.Commands, pipelineCommands(c, usageErr)...)
	app.Commands = append(app.Commands, logsCommands(c, usageErr)...)
	app.Commands = append(app.Commands, jobIDsCommand(c))
	app.Commands = append(app.Commands, pauseCommands(c, usageErr)...)
	app.Commands = append(app.Commands, serveCommands(c, usageErr)...)
	app.Commands = append(app.Commands, migrateCommands(c, usageErr)...)
	app.Commands = append(app.Commands, movingCommands(c, usageErr)...)
	storeAnywhere(app.Commands, false, false)
	daemon.SpoolAnywhere(app.Commands)
	daemon.SetMan(app, manPage())
	return app
}

// durationHint says what a duration flag takes when its value did not
// parse (the flag package says only "parse error"): "1" is not a duration,
// "1s" is.
func durationHint(cc *cli.Context, err error) error {
	msg := err.Error()
	_, rest, ok := strings.Cut(msg, " for flag -")
	if !ok || !strings.HasSuffix(msg, "parse error") {
		return err
	}
	name, _, _ := strings.Cut(rest, ":")
	flags := cc.App.Flags
	if cc.Command != nil {
		flags = append(flags, cc.Command.Flags...)
	}
	for _, f := range flags {
		if _, isDur := f.(*cli.DurationFlag); !isDur {
			continue
		}
		for _, n := range f.Names() {
			if n == strings.TrimPrefix(name, "-") {
				return fmt.Errorf("%s: a duration with its unit is needed, such as 1s, 500ms or 2m", strings.TrimSuffix(msg, ": parse error"))
			}
		}
	}
	return err
}
