package ctl

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/source"
)

// SourceAddOptions are the flags of farroctl source add.
type SourceAddOptions struct {
	URL          string
	Name         string // "": derived from the URL
	Every        time.Duration
	Scope        string
	MaxDepth     int
	MaxPages     int64
	Delay        time.Duration
	BackoffBase  time.Duration
	BackoffMax   time.Duration
	Jitter       time.Duration
	UserAgent    string
	AllowPrivate bool
	Resolve      []string
	Timeout      time.Duration
}

// SourceAdd registers a source; it is due for its first check at once.
func (c *Ctl) SourceAdd(o SourceAddOptions) error {
	name := o.Name
	if name == "" {
		name = source.NameFromURL(o.URL)
	}
	s := source.New(name, o.URL)
	s.Every, s.Scope, s.MaxDepth, s.MaxPages = crawl.Duration(o.Every), crawl.Scope(o.Scope), o.MaxDepth, o.MaxPages
	s.Delay, s.BackoffBase, s.BackoffMax, s.Jitter = crawl.Duration(o.Delay), crawl.Duration(o.BackoffBase), crawl.Duration(o.BackoffMax), crawl.Duration(o.Jitter)
	s.UserAgent, s.AllowPrivate, s.Timeout = o.UserAgent, o.AllowPrivate, crawl.Duration(o.Timeout)
	for _, r := range o.Resolve {
		hp, addr, err := crawl.ParseResolve(r)
		if err != nil {
			return UsageError(err)
		}
		if s.Resolve == nil {
			s.Resolve = map[string]string{}
		}
		s.Resolve[hp] = addr
	}
	if err := s.Validate(); err != nil {
		return UsageError(err)
	}
	sp, err := c.open()
	if err != nil {
		return err
	}
	if err := source.Create(sp, s, c.now()); err != nil {
		return err
	}
	fmt.Fprintln(c.Stdout, s.Name)
	return nil
}

// SourceRemove removes sources (their crawls are kept).
func (c *Ctl) SourceRemove(names []string) error {
	if len(names) == 0 {
		return Usagef("source rm: name at least one source")
	}
	sp, err := c.existing()
	if err != nil {
		return err
	}
	failed := 0
	for _, n := range names {
		if err := source.ValidateName(n); err != nil {
			c.warnf("%v", err)
			failed++
			continue
		}
		if err := source.Remove(sp, n); err != nil {
			c.warnf("%v", err)
			failed++
			continue
		}
		fmt.Fprintf(c.Stdout, "%s: removed (its crawl %s%s is kept)\n", n, source.CrawlPrefix, n)
	}
	if failed > 0 {
		return silent("%d of %d sources not removed", failed, len(names))
	}
	return nil
}

// SourceShow prints one source's file, plus its state, as JSON.
func (c *Ctl) SourceShow(name string) error {
	if err := source.ValidateName(name); err != nil {
		return UsageError(err)
	}
	sp, err := c.existing()
	if err != nil {
		return err
	}
	s, err := source.Load(sp, name)
	if err != nil {
		return err
	}
	state, cj := sourceStateWithJob(sp, s, c.now())
	out := struct {
		*source.Source
		State       string    `json:"state"`
		CheckJob    *CheckJob `json:"check_job,omitempty"`
		JitterBound string    `json:"jitter_bound"`
	}{s, state, cj, s.JitterBound().String()}
	b, _ := json.MarshalIndent(out, "", "  ")
	_, err = fmt.Fprintf(c.Stdout, "%s\n", b)
	return err
}

// SourceState is a source's state for humans: acquire-pending, due,
// deferred (its domain blocked or unreachable in the domain registry:
// next check at the cooldown's end), backing-off (failing, next check
// scheduled), or scheduled.
func SourceState(s *source.Source, now time.Time) string {
	switch {
	case s.AcquirePending:
		return "acquire-pending"
	case s.Due(now):
		return "due"
	case s.Deferred != "":
		return "deferred"
	case s.ConsecutiveFailures > 0:
		return "backing-off"
	}
	return "scheduled"
}

// SourceList prints the sources: a table, or JSON Lines. Files that are
// not readable sources are reported on stderr (exit 1), never skipped
// silently and never fatal to the listing.
func (c *Ctl) SourceList(jsonOut bool) error {
	sp, err := c.existing()
	if err != nil {
		return err
	}
	srcs, probs, err := source.List(sp)
	if err != nil {
		return err
	}
	now := c.now()
	if jsonOut {
		enc := json.NewEncoder(c.Stdout)
		for _, s := range srcs {
			state, cj := sourceStateWithJob(sp, s, now)
			if err := enc.Encode(struct {
				*source.Source
				State    string    `json:"state"`
				CheckJob *CheckJob `json:"check_job,omitempty"`
			}{s, state, cj}); err != nil {
				return err
			}
		}
	} else {
		tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSTATE\tEVERY\tLAST CHECK\tOUTCOME\tFAILS\tNEXT CHECK\tLAST ACQUIRED\tURL")
		for _, s := range srcs {
			state, cj := sourceStateWithJob(sp, s, now)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.Name, stateText(state, cj), s.Every.D(),
				fmtTime(s.LastCheckedAt), dash(string(s.LastOutcome)), s.ConsecutiveFailures, fmtNext(s.NextCheckAfter, now), fmtTime(s.LastAcquiredAt), s.URL)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, p := range probs {
		c.warnf("%s: %s", p.File, p.Error)
	}
	if len(probs) > 0 {
		return silent("%d unreadable source files", len(probs))
	}
	return nil
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func fmtNext(t *time.Time, now time.Time) string {
	if t == nil || !now.Before(*t) {
		return "now"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}
