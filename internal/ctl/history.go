package ctl

import (
	"bufio"
	"bytes"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// HistoryOptions are history's flags.
type HistoryOptions struct {
	JSON bool // print events.jsonl's lines as they are
}

// History prints the transitions of job id from its events.jsonl: a table
// (time, actor, from, to, attempt, reason), or with JSON the file's lines
// verbatim (JSON Lines). A job found in several places, or without a
// readable history, is an error (exit 1).
func (c *Ctl) History(args []string, o HistoryOptions) error {
	if len(args) != 1 {
		return Usagef("history takes exactly one job ID, got %d", len(args))
	}
	id := args[0]
	if err := job.ValidateID(id); err != nil {
		return UsageError(err)
	}
	data, id, err := c.historyData(id)
	if err != nil {
		return err
	}
	if o.JSON {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64*1024), 16<<20)
		for sc.Scan() {
			if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
				fmt.Fprintf(c.Stdout, "%s\n", line)
			}
		}
		return sc.Err()
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tACTOR\tFROM\tTO\tATTEMPT\tREASON")
	bad := 0
	for _, h := range parseHistory(data) {
		if h.Bad != "" {
			// A torn last line (a crash mid-append) or a damaged one: say
			// so and go on; the job's state is job.json, not this file.
			fmt.Fprintf(tw, "-\t-\t-\t-\t-\t(line %d unreadable: %s)\n", h.Line, h.Bad)
			bad++
			continue
		}
		ev := h.Event
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", ev.Time.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			dash(ev.Actor), dash(string(ev.From)), dash(string(ev.To)), ev.Attempt, oneLine(ev.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if bad > 0 {
		c.warnf("%s: %d unreadable line(s) in %s", id, bad, job.EventsFile)
	}
	return nil
}

// fmtAge renders a duration for humans: 850ms, 12s, 5m12s, 3h05m, 2d04h.
func fmtAge(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
