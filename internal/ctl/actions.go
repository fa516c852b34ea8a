package ctl

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// Action is an operator command over job IDs.
type Action string

// The operator actions.
const (
	Hold    Action = "hold"    // queued/deferred -> held; running: asks the agent
	Release Action = "release" // held -> queued
	Cancel  Action = "cancel"  // -> killed "cancelled"; running: asks the agent
	Requeue Action = "requeue" // failed/stale/deferred -> queued, not_before cleared
	Kill    Action = "kill"    // -> killed "killed by operator"; running: asks the agent
	Retry   Action = "retry"   // killed (with Succeeded: succeeded too) -> queued, attempts 0 (job.Spool.Retry)
	Remove  Action = "rm"      // succeeded/killed: deleted for good (job.Spool.Remove)
)

// Actions lists the operator actions.
var Actions = []Action{Hold, Release, Cancel, Requeue, Kill, Retry, Remove}

// rule says what an action does to a job in a given state.
type rule struct {
	to      job.State
	reason  string
	control string // for in-progress jobs: the control action
	from    []job.State
	// terminal: the action takes jobs out of a terminal state, through
	// its own transaction (job.Spool.Retry, job.Spool.Remove), not Move.
	terminal bool
}

// ReasonOf is the reason an action gives the jobs it moves ("" for rm),
// before an operator's note (": NOTE").
func ReasonOf(a Action) string { return rules[a].reason }

var rules = map[Action]rule{
	Hold:    {to: job.Held, reason: job.ReasonHeld, control: job.ControlHold, from: []job.State{job.Queued, job.Deferred}},
	Release: {to: job.Queued, reason: "released by operator", from: []job.State{job.Held}},
	Cancel: {to: job.Killed, reason: job.ReasonCancelled, control: job.ControlCancel,
		from: []job.State{job.Queued, job.Deferred, job.Held, job.Failed, job.Stale}},
	Requeue: {to: job.Queued, reason: "requeued by operator", from: []job.State{job.Failed, job.Stale, job.Deferred}},
	Kill: {to: job.Killed, reason: job.ReasonKilled, control: job.ControlKill,
		from: []job.State{job.Queued, job.Deferred, job.Held, job.Failed, job.Stale}},
	Retry:  {to: job.Queued, reason: job.ReasonRetried, from: []job.State{job.Killed}, terminal: true},
	Remove: {from: []job.State{job.Succeeded, job.Killed}, terminal: true},
}

// ActOptions are the flags of the actions.
type ActOptions struct {
	// Note is an optional operator note, appended to the reason as
	// ": note" (e.g. "cancelled: duplicate of job X").
	Note string
	// Retries bounds the attempts on a busy job (its lock held for a
	// moment by an agent claiming it or managerd moving it, or left by a
	// process that died holding it until watchdogd removes it, about a
	// second later); default 100 (five seconds at the default Backoff).
	Retries int
	// Backoff is the pause between attempts; default 50ms.
	Backoff time.Duration
	// Wait, for a running job asked to stop through control.json, is
	// how long to wait for the outcome (0: report the request once it
	// is written).
	Wait time.Duration
	// Succeeded lets retry take succeeded jobs too (killed ones only
	// otherwise).
	Succeeded bool

	// only, set by a filter's run: a job found in none of these states
	// (it moved since it was selected) is skipped with errLeft.
	only []job.State
}

// Act applies action to each ID independently and prints one line per ID
// on stdout saying what happened. Failures are reported on stderr, one
// line per ID, and make the result exit 1. "-" as the only ID reads the
// IDs from stdin (readIDs). An argument that is not an existing ID but
// the unique prefix (at least MinPrefix characters) of one stands for it.
func (c *Ctl) Act(a Action, ids []string, o ActOptions) error {
	if _, ok := rules[a]; !ok {
		return Usagef("unknown action %q", a)
	}
	if len(ids) == 1 && ids[0] == "-" {
		read, err := readIDs(c.Stdin)
		if err != nil {
			return err
		}
		if len(read) == 0 {
			c.warnf("%s: no job IDs on stdin; nothing done", a)
			return checkActOptions(a, &o)
		}
		ids = read
	} else if len(ids) == 0 {
		return Usagef("%s needs at least one job ID (or - to read them from stdin, or --state to select them)", a)
	}
	for _, id := range ids {
		if id == "-" {
			return Usagef("%s: - (read job IDs from stdin) must be the only argument", a)
		}
		if strings.HasPrefix(id, "-") && len(id) > 1 {
			return Usagef("%s: flag %q after job IDs: put flags before the IDs", a, id)
		}
	}
	// An unsafe ID is a usage error (exit 2, as for show), refused before
	// any job is touched.
	for _, id := range ids {
		if err := job.ValidateID(id); err != nil {
			return UsageError(err)
		}
	}
	if err := checkActOptions(a, &o); err != nil {
		return err
	}
	d, done, err := c.door(true)
	if err != nil {
		return err
	}
	defer done()
	failed := 0
	var acted []string // resolved IDs, for the audit line
	for _, arg := range ids {
		id, err := d.resolve(arg)
		if err != nil {
			failed++
			c.warnf("%v", err)
			continue
		}
		acted = append(acted, id)
		msg, err := c.act(d, a, id, o)
		if err != nil {
			failed++
			c.warnf("%s: %v", id, err)
			continue
		}
		fmt.Fprintf(c.Stdout, "%s: %s\n", id, msg)
	}
	d.audit(job.Audit{Command: string(a), JobIDs: acted, Count: len(ids), Failed: failed, Reason: o.Note})
	if failed > 0 {
		return silent("%s: %d of %d jobs failed", a, failed, len(ids))
	}
	return nil
}

// checkActOptions refuses options that do not fit action a, and fills in
// the defaults.
func checkActOptions(a Action, o *ActOptions) error {
	if strings.ContainsAny(o.Note, "\n\r") {
		return Usagef("--reason must be one line")
	}
	if o.Succeeded && a != Retry {
		return Usagef("--succeeded applies only to retry")
	}
	if o.Retries <= 0 {
		// Five seconds: an operator's action that finds the lock of a
		// farroctl or agent killed mid-move waits for watchdogd to remove
		// it (about a second on a busy host, more on a loaded one)
		// instead of reporting it busy.
		o.Retries = 100
	}
	if o.Backoff <= 0 {
		o.Backoff = 50 * time.Millisecond
	}
	return nil
}

// act applies one action to one job. A busy lock or a job that moved
// between locating and acting is retried after locating it again: a
// queued job being claimed right now is running a moment later, and is
// then asked to stop through its control file.
func (c *Ctl) act(d door, a Action, id string, o ActOptions) (string, error) {
	if err := job.ValidateID(id); err != nil {
		return "", err
	}
	r := rules[a]
	if r.terminal {
		return c.actTerminal(d, a, id, o)
	}
	reason := r.reason
	if o.Note != "" {
		reason += ": " + o.Note
	}
	return c.locateAndAct(d, id, o, func(loc job.Location) (string, error) {
		switch {
		case loc.State == r.to && loc.State != job.InProgress:
			return fmt.Sprintf("already %s", r.to), nil
		case loc.State == job.InProgress:
			if r.control == "" {
				return "", fmt.Errorf("is running (agent %s): %s applies only to %s jobs", loc.Agent, a, statesList(r.from))
			}
			err := d.requestControl(loc, id, job.Control{Action: r.control, Actor: Actor, Reason: o.Note, RequestedAt: c.now()})
			if err != nil {
				return "", err // transient: it finished or was released meanwhile
			}
			if o.Wait > 0 {
				return c.awaitControl(d, a, id, loc.Agent, reason, o)
			}
			return fmt.Sprintf("%s requested (running on agent %s; it stops the handler and commits %s, unless the job succeeds first)", r.control, loc.Agent, r.to), nil
		case !contains(r.from, loc.State):
			if loc.State.Terminal() {
				return "", fmt.Errorf("is %s (terminal): nothing to %s", loc.State, a)
			}
			hint := ""
			if a == Requeue && loc.State == job.Held {
				hint = " (use release)"
			}
			return "", fmt.Errorf("is %s: %s applies only to %s jobs%s", loc.State, a, statesList(r.from), hint)
		}
		j, err := d.move(id, loc.State, r.to, reason)
		if err != nil {
			return "", err
		}
		return moved(loc.State, j), nil
	})
}

// locateAndAct locates job id (settled: a job moving meanwhile is neither
// a duplicate nor missing) and hands its one location to step. A step
// that finds the job busy or gone (d.transient: it moved between the
// locate and the step) is tried again after locating the job again, up
// to o.Retries times.
func (c *Ctl) locateAndAct(d door, id string, o ActOptions, step func(job.Location) (string, error)) (string, error) {
	var last error
	for try := 0; try < o.Retries; try++ {
		if try > 0 {
			time.Sleep(o.Backoff)
		}
		loc, err := d.locate(id)
		if errors.Is(err, job.ErrNotFound) {
			if o.only != nil {
				return "", errLeft // gone since a filter selected it
			}
			return "", job.ErrNotFound // the caller names the job
		}
		if err != nil {
			return "", err
		}
		if o.only != nil && !contains(o.only, loc.State) {
			return "", errLeft
		}
		msg, err := step(loc)
		switch {
		case err == nil:
			return msg, nil
		case d.transient(err):
			last = err
			continue
		}
		return "", err
	}
	return "", d.stuck(id, last)
}

// actTerminal applies retry or rm to one job: located (settled), checked
// against the states the action may take it from, then handed to its
// transaction in pkg/job, which takes the job's lock and checks again. A
// busy lock or a job that moved meanwhile is retried as act does.
func (c *Ctl) actTerminal(d door, a Action, id string, o ActOptions) (string, error) {
	from := rules[a].from
	if a == Retry && o.Succeeded {
		from = []job.State{job.Killed, job.Succeeded}
	}
	return c.locateAndAct(d, id, o, func(loc job.Location) (string, error) {
		if !contains(from, loc.State) {
			switch {
			case a == Retry && loc.State == job.Succeeded:
				return "", fmt.Errorf("is succeeded: retry takes killed jobs (add --succeeded to run a succeeded job again)")
			case a == Retry && (loc.State == job.Failed || loc.State == job.Stale || loc.State == job.Deferred):
				return "", fmt.Errorf("is %s: retry applies only to killed jobs (use requeue)", loc.State)
			case a == Remove:
				return "", fmt.Errorf("is %s, not terminal: rm applies only to succeeded or killed jobs (cancel it first)", loc.State)
			}
			return "", fmt.Errorf("is %s: %s applies only to %s jobs", loc.State, a, statesList(from))
		}
		if a == Remove {
			if err := d.remove(id); err != nil {
				return "", err
			}
			return fmt.Sprintf("%s -> removed", loc.State), nil
		}
		j, err := d.retry(id, o.Succeeded)
		if err != nil {
			return "", err
		}
		return moved(loc.State, j) + " (retried: attempts reset)", nil
	})
}

// awaitControl waits up to o.Wait for the outcome of a control request
// written to job id running on agent. The request names the attempt, so
// whoever moves the job next applies it (docs/ARCHITECTURE.md); if the
// job is found out of in-progress/ in a state it can leave, farroctl
// applies it itself. It reports what happened: the job held or killed,
// or finished as something else before the request could take effect.
func (c *Ctl) awaitControl(d door, a Action, id, agent, reason string, o ActOptions) (string, error) {
	r := rules[a]
	deadline := time.Now().Add(o.Wait)
	for time.Now().Before(deadline) {
		time.Sleep(o.Backoff)
		loc, err := d.locate(id)
		if err != nil {
			return "", err
		}
		switch {
		case loc.State == job.InProgress:
			continue
		case loc.State == r.to:
			j, err := d.read(loc, id)
			if err != nil {
				return fmt.Sprintf("in-progress -> %s", r.to), nil
			}
			return moved(job.InProgress, j), nil
		case loc.State.Terminal():
			return "", fmt.Errorf("finished as %s before the %s request took effect", loc.State, r.control)
		}
		to := r.to
		if !job.CanTransition(loc.State, to) {
			// A hold of a failed job: through queued, where the request
			// (it travels with the job) is applied by the next move or
			// claim, whichever comes first.
			to = job.Queued
		}
		j, err := d.move(id, loc.State, to, reason)
		if err == nil && j.Status != r.to {
			continue
		}
		if err == nil {
			return moved(loc.State, j), nil
		}
		if !d.transient(err) {
			return "", err
		}
	}
	return fmt.Sprintf("%s requested, not applied yet after %s (agent %s; it stops the handler and commits %s, unless the job succeeds first)", r.control, o.Wait, agent, r.to), nil
}

func moved(from job.State, j *job.Job) string {
	if j.Status == job.Killed {
		return fmt.Sprintf("%s -> killed (%s)", from, j.Reason)
	}
	return fmt.Sprintf("%s -> %s", from, j.Status)
}

func contains(states []job.State, st job.State) bool {
	for _, s := range states {
		if s == st {
			return true
		}
	}
	return false
}

func statesList(states []job.State) string {
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
