package ctl

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/farro-dev/farro/pkg/job"
)

// MinPrefix is the shortest argument taken as the prefix of a job ID: a
// shorter one that is not an ID is simply not found.
const MinPrefix = 6

// maxAmbiguous is how many matches an ambiguous prefix's error names.
const maxAmbiguous = 5

// maxStdinLine bounds a line of IDs read from stdin (an ID is at most 128
// bytes; a line may carry spaces around it).
const maxStdinLine = 4096

// MaxCompletions bounds the job IDs offered to the shell's completion.
const MaxCompletions = 200

// resolver turns an operator's arguments into job IDs: an existing ID is
// itself; otherwise an argument of at least MinPrefix characters that is
// the prefix of exactly one job's ID stands for it. The job names come
// from one listing of the state directories (names only, never a
// job.json), taken on first need and reused for the other arguments.
type resolver struct {
	s      *job.Spool
	names  []string // sorted, unique
	loaded bool
}

func newResolver(s *job.Spool) *resolver { return &resolver{s: s} }

// resolve returns the job ID arg stands for. An exact ID always wins: it
// is located first (settled, so a job moving at that moment is not
// missed), and a listing that names arg itself also returns arg. An
// argument that matches nothing is returned as it is, for the caller to
// report as not found; an ambiguous prefix is an error naming up to
// maxAmbiguous of its matches.
func (r *resolver) resolve(arg string) (string, error) {
	if len(arg) < MinPrefix {
		return arg, nil
	}
	if _, err := r.s.LocateSettled(arg, Actor); !errors.Is(err, job.ErrNotFound) {
		return arg, nil // found (or an error the caller's own locate reports)
	}
	if !r.loaded {
		names, err := jobNames(r.s, nil)
		if err != nil {
			return "", err
		}
		r.names, r.loaded = names, true
	}
	return matchPrefix(arg, r.names)
}

// matchPrefix returns the one name of the sorted names that starts with
// arg (arg itself when it is one of them, or when none does), or an
// error naming up to maxAmbiguous of the matches.
func matchPrefix(arg string, names []string) (string, error) {
	i := sort.SearchStrings(names, arg)
	var matches []string
	n := 0
	for ; i < len(names) && strings.HasPrefix(names[i], arg); i++ {
		if names[i] == arg {
			return arg, nil
		}
		n++
		if len(matches) < maxAmbiguous {
			matches = append(matches, names[i])
		}
	}
	switch n {
	case 0:
		return arg, nil
	case 1:
		return matches[0], nil
	}
	more := ""
	if n > len(matches) {
		more = ", ..."
	}
	return "", fmt.Errorf("%s: ambiguous ID prefix: %d jobs match: %s%s", arg, n, strings.Join(matches, ", "), more)
}

// jobNames lists the job names (directory names) of the given states (all
// when empty), sorted and without repeats (a job moving while the
// directories are listed may be seen twice). Nothing is read but the
// directories; hostile entries (symlinks, files) are left out.
func jobNames(s *job.Spool, states []job.State) ([]string, error) {
	es, err := walk(s, states)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(es))
	for _, e := range es {
		if !e.Hostile {
			names = append(names, e.Name)
		}
	}
	sort.Strings(names)
	out := names[:0]
	for i, n := range names {
		if i == 0 || n != names[i-1] {
			out = append(out, n)
		}
	}
	return out, nil
}

// resolveOne resolves the single ID argument of show and history.
func (c *Ctl) resolveOne(s *job.Spool, id string) (string, error) {
	return newResolver(s).resolve(id)
}

// readIDs reads job IDs from r, one per line: spaces around an ID are
// trimmed, blank lines and lines starting with # are skipped. An unsafe
// ID or an overlong line is a usage error naming its line, and nothing is
// returned: no job is touched on bad input.
func readIDs(r io.Reader) ([]string, error) {
	if r == nil {
		return nil, Usagef("no stdin to read job IDs from")
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), maxStdinLine)
	var ids []string
	line := 0
	for sc.Scan() {
		line++
		id := strings.TrimSpace(sc.Text())
		if id == "" || strings.HasPrefix(id, "#") {
			continue
		}
		if err := job.ValidateID(id); err != nil {
			return nil, Usagef("stdin line %d: %v", line, err)
		}
		ids = append(ids, id)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, Usagef("stdin line %d: longer than %d bytes, not a job ID", line+1, maxStdinLine)
		}
		return nil, fmt.Errorf("reading job IDs from stdin: %w", err)
	}
	return ids, nil
}

// CompletionStates are the states whose jobs the shell offers for the
// arguments of command: those the action applies to (retry: killed and
// succeeded, as --succeeded may be given), every state for show and
// history. ok is false for a command that takes no job ID.
func CompletionStates(command string) (states []job.State, ok bool) {
	switch command {
	case "show", "history":
		return job.States, true
	case string(Retry):
		return []job.State{job.Killed, job.Succeeded}, true
	}
	if _, isAction := rules[Action(command)]; isAction {
		return actionStates(Action(command), false), true
	}
	return nil, false
}

// CompleteIDs prints, one per line, at most MaxCompletions IDs of jobs
// that command applies to and that start with prefix, from listings of
// those states' directories (no job.json is read). It is what the
// completion scripts run; a missing spool yields nothing.
func (c *Ctl) CompleteIDs(command, prefix string) error {
	states, ok := CompletionStates(command)
	if !ok {
		return Usagef("%s takes no job ID", command)
	}
	if c.OnStore() {
		return c.storeCompleteIDs(states, prefix)
	}
	s, err := c.existing()
	if err != nil {
		return err
	}
	names, err := jobNames(s, states)
	if err != nil {
		return err
	}
	var b strings.Builder
	n := 0
	for i := sort.SearchStrings(names, prefix); i < len(names) && n < MaxCompletions; i++ {
		if !strings.HasPrefix(names[i], prefix) {
			break
		}
		b.WriteString(names[i])
		b.WriteByte('\n')
		n++
	}
	_, err = io.WriteString(c.Stdout, b.String())
	return err
}
