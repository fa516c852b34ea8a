package ctl

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/farro-dev/farro/internal/pause"
	"github.com/farro-dev/farro/pkg/job"
)

// AgentKinds are the job kinds agentd has handlers for. pause refuses any
// other kind: a mistyped kind would pause nothing.
var AgentKinds = []string{"exec", "noop", "crawl.fetch", "crawl.robots", "source.check"}

// PausedDoc is `paused --json`'s output.
type PausedDoc struct {
	Paused  []pause.Listed  `json:"paused"`
	Ignored []pause.Ignored `json:"ignored"` // entries of paused/ that pause nothing
}

// checkPauseKind validates a pause's or resume's kind (usage errors).
func checkPauseKind(args []string, cmd string, known bool) (string, error) {
	if len(args) != 1 {
		return "", Usagef("%s takes exactly one kind, got %d (see farroctl %s --help)", cmd, len(args), cmd)
	}
	kind := args[0]
	if err := pause.ValidateKind(kind); err != nil {
		return "", UsageError(err)
	}
	if known && !slices.Contains(AgentKinds, kind) {
		return "", Usagef("unknown kind %q (agentd runs: %s)", kind, strings.Join(AgentKinds, ", "))
	}
	return kind, nil
}

// Pause pauses a kind queue-wide: paused/<kind>, written durably, with
// who, when and why. Every agent stops claiming the kind's jobs within
// about a second; its queued jobs stay queued, running ones finish.
func (c *Ctl) Pause(args []string, reason string) error {
	kind, err := checkPauseKind(args, "pause", true)
	if err != nil {
		return err
	}
	if len(reason) > pause.MaxReasonLen {
		return Usagef("--reason too long: %d bytes, at most %d", len(reason), pause.MaxReasonLen)
	}
	e := pause.Entry{Kind: kind, PausedAt: c.now(), Actor: Actor, PID: os.Getpid(), Reason: reason}
	if u, err := user.Current(); err == nil {
		e.User = u.Username
	} else {
		e.User = strconv.Itoa(os.Getuid())
	}
	e.Host, _ = os.Hostname()
	since, err := readFrom(c, func() (*time.Time, error) { return c.storePause(e) }, func(s *job.Spool) (*time.Time, error) {
		prev, err := pause.Pause(s.Root, e)
		if err != nil || prev == nil {
			return nil, err
		}
		return &prev.PausedAt, nil
	})
	if err != nil {
		return fmt.Errorf("pause %s: %w", kind, err)
	}
	if since != nil {
		fmt.Fprintf(c.Stdout, "%s paused (already paused since %s; reason updated)\n", kind, since.UTC().Format(time.RFC3339))
		return nil
	}
	fmt.Fprintf(c.Stdout, "%s paused: agents claim none of its jobs until `farroctl resume %s`; running jobs finish\n", kind, kind)
	return nil
}

// Resume ends the pause of a kind: paused/<kind> is removed. A kind that
// was not paused is reported, not an error.
func (c *Ctl) Resume(args []string) error {
	kind, err := checkPauseKind(args, "resume", false)
	if err != nil {
		return err
	}
	was, err := readFrom(c, func() (bool, error) { return c.storeResume(kind) }, func(s *job.Spool) (bool, error) {
		return pause.Resume(s.Root, kind)
	})
	if err != nil {
		return fmt.Errorf("resume %s: %w", kind, err)
	}
	if !was {
		fmt.Fprintf(c.Stdout, "%s was not paused\n", kind)
		return nil
	}
	fmt.Fprintf(c.Stdout, "%s resumed: agents claim its jobs again\n", kind)
	return nil
}

// Paused lists the paused kinds: a table (KIND, SINCE, BY, REASON) or
// one JSON document. Entries of paused/ that pause nothing are reported
// on stderr (in "ignored" with JSON).
func (c *Ctl) Paused(jsonOut bool) error {
	doc, err := readFrom(c, c.storePaused, func(s *job.Spool) (PausedDoc, error) {
		ls, ign, err := pause.List(s.Root)
		return PausedDoc{Paused: ls, Ignored: ign}, err
	})
	if err != nil {
		return err
	}
	ls, ign := doc.Paused, doc.Ignored
	if jsonOut {
		return json.NewEncoder(c.Stdout).Encode(PausedDoc{Paused: ls, Ignored: ign})
	}
	for _, i := range ign {
		c.warnf("paused/%s pauses nothing: %s; remove it", i.Name, i.Why)
	}
	if len(ls) == 0 {
		fmt.Fprintln(c.Stdout, "no kind is paused")
		return nil
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tSINCE\tBY\tREASON")
	for _, l := range ls {
		if l.Entry == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t(%s)\n", l.Kind, truncate(l.Problem, 72))
			continue
		}
		by := l.Actor
		if l.User != "" {
			by = l.User + "@" + l.Host
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Kind, l.PausedAt.UTC().Format(time.RFC3339), dash(by), dash(truncate(oneLine(l.Reason), 72)))
	}
	return tw.Flush()
}

// pausedKinds is the set of paused kinds of the spool at root (nil when
// paused/ cannot be listed: nothing is shown as paused).
func pausedKinds(root string) map[string]bool {
	kinds, _, err := pause.Kinds(root)
	if err != nil {
		return nil
	}
	m := make(map[string]bool, len(kinds))
	for _, k := range kinds {
		m[k] = true
	}
	return m
}
