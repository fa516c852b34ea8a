package ctl

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/daemon"
	"github.com/farro-dev/farro/pkg/job"
)

// Filter selects the jobs of an action instead of IDs, like postsuper:
// the jobs in the given states, optionally of one kind and in their state
// for longer than OlderThan. Without All the action only says what it
// would do.
type Filter struct {
	States    []string      // --state (repeatable or comma-separated)
	Kind      string        // --kind: only jobs of this kind
	OlderThan time.Duration // --older-than: only jobs in their state for longer
	All       bool          // --all: act (else a dry run)
}

// Set reports whether any selection flag was given.
func (f Filter) Set() bool {
	return len(f.States) > 0 || f.Kind != "" || f.OlderThan != 0 || f.All
}

// errLeft: a selected job left the selected states before the action got
// to it; it is skipped, not failed.
var errLeft = errors.New("left the selected state")

// selectedHook, when set (by tests), runs between the selection and the
// actions of a filter's run.
var selectedHook func(ids []string)

// ActOn runs action a on the jobs named by args (IDs, unique ID prefixes,
// or "-" alone: IDs read from stdin), or selected by f. A filter and IDs
// together are refused.
func (c *Ctl) ActOn(a Action, args []string, f Filter, o ActOptions) error {
	if _, ok := rules[a]; !ok {
		return Usagef("unknown action %q", a)
	}
	if f.Set() {
		if len(args) > 0 {
			return Usagef("%s: give job IDs or a filter (--state), not both", a)
		}
		return c.bulk(a, f, o)
	}
	return c.Act(a, args, o)
}

// actionStates are the states a filter of action a may select: those it
// moves jobs out of, and in-progress for the actions a running job is
// asked to obey (hold, cancel, kill).
func actionStates(a Action, succeeded bool) []job.State {
	r := rules[a]
	states := append([]job.State(nil), r.from...)
	if a == Retry && succeeded {
		states = append(states, job.Succeeded)
	}
	if r.control != "" {
		states = append(states, job.InProgress)
	}
	// Lifecycle order, for the messages.
	var out []job.State
	for _, st := range job.States {
		if contains(states, st) {
			out = append(out, st)
		}
	}
	return out
}

// bulk applies a to the jobs f selects: a dry run that counts them, or
// with f.All the action on each, then one summary line.
func (c *Ctl) bulk(a Action, f Filter, o ActOptions) error {
	if len(f.States) == 0 {
		return Usagef("%s: --kind, --older-than and --all select jobs with --state S", a)
	}
	if f.OlderThan < 0 {
		return Usagef("%s: --older-than must not be negative", a)
	}
	if err := checkActOptions(a, &o); err != nil {
		return err
	}
	allowed := actionStates(a, o.Succeeded)
	var states []job.State
	for _, name := range f.States {
		for _, part := range strings.Split(name, ",") {
			st, ok := ParseState(part)
			if !ok {
				return Usagef("unknown state %q (one of %s)", part, stateNames())
			}
			if !contains(allowed, st) {
				hint := ""
				if a == Retry && st == job.Succeeded {
					hint = " (add --succeeded to run succeeded jobs again)"
				}
				return Usagef("%s --state %s: %s takes %s jobs%s", a, st, a, statesList(allowed), hint)
			}
			if !contains(states, st) {
				states = append(states, st)
			}
		}
	}
	desc := describeFilter(states, f)
	d, closeDoor, err := c.door(f.All)
	if err != nil {
		return err
	}
	defer closeDoor()
	ids, err := d.selectJobs(states, f)
	if err != nil {
		return err
	}
	verb := string(a)
	if a == Remove {
		verb = "remove"
	}
	if len(ids) == 0 {
		fmt.Fprintf(c.Stdout, "no jobs to %s (%s)\n", verb, desc)
		return nil
	}
	if !f.All {
		fmt.Fprintf(c.Stdout, "would %s %s (%s); run again with --all to do it\n", verb, jobsCount(len(ids)), desc)
		return nil
	}
	if selectedHook != nil {
		selectedHook(ids)
	}
	o.only = states
	done, failed, left := 0, 0, 0
	for _, id := range ids {
		_, err := c.act(d, a, id, o)
		switch {
		case errors.Is(err, errLeft):
			left++
		case err != nil:
			failed++
			c.warnf("%s: %v", id, err)
		default:
			done++
		}
	}
	line := fmt.Sprintf("%s %s (%s): done %s, failed %s", verb, jobsCount(len(ids)), desc, thousands(done), thousands(failed))
	if left > 0 {
		line += fmt.Sprintf(", skipped %s (no longer %s)", thousands(left), statesList(states))
	}
	fmt.Fprintln(c.Stdout, line)
	d.audit(job.Audit{Command: string(a) + " --state", JobIDs: ids, Failed: failed, Reason: o.Note, Target: desc})
	if failed > 0 {
		return silent("%s: %d of %d jobs failed", a, failed, len(ids))
	}
	return nil
}

// selectJobs lists the jobs of states that match f, in lifecycle order
// then by name. Only the state directories are listed unless f needs a
// job's kind or age: then its job.json is read (capped, non-blocking),
// and a job whose job.json cannot be read is not selected (one stderr
// line says how many were left out). Hostile entries are never selected.
func (c *Ctl) selectJobs(s *job.Spool, states []job.State, f Filter) ([]string, error) {
	es, err := walk(s, states)
	if err != nil {
		return nil, err
	}
	read := f.Kind != "" || f.OlderThan > 0
	now := c.now()
	var ids []string
	seen := map[string]bool{}
	unreadable := 0
	for _, e := range es {
		if e.Hostile || seen[e.Name] {
			continue
		}
		if read {
			j, err := job.ReadJob(e.Path)
			if err != nil || j == nil {
				unreadable++
				continue
			}
			if f.Kind != "" && j.Kind != f.Kind {
				continue
			}
			if f.OlderThan > 0 && now.Sub(AgeSince(j)) <= f.OlderThan {
				continue
			}
		}
		seen[e.Name] = true
		ids = append(ids, e.Name)
	}
	if unreadable > 0 {
		c.warnf("%s with an unreadable job.json not selected (farroctl fsck)", jobsCount(unreadable))
	}
	return ids, nil
}

// describeFilter says what a filter selects: "state queued, kind exec, older
// than 2h".
func describeFilter(states []job.State, f Filter) string {
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	parts := []string{"state " + strings.Join(names, ",")}
	if f.Kind != "" {
		parts = append(parts, "kind "+f.Kind)
	}
	if f.OlderThan > 0 {
		parts = append(parts, "older than "+daemon.ShortDuration(f.OlderThan))
	}
	return strings.Join(parts, ", ")
}

func jobsCount(n int) string {
	if n == 1 {
		return "1 job"
	}
	return thousands(n) + " jobs"
}

// thousands writes n with comma separators: 1234 -> 1,234.
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 || len(s) <= 3 {
		return s
	}
	var b strings.Builder
	head := len(s) % 3
	if head > 0 {
		b.WriteString(s[:head])
	}
	for i := head; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}
