package ctl

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// ExportFormat is the version of farroctl export's lines, written in
// every line (farro_export): import refuses a line of another version.
const ExportFormat = 1

// MaxExportLine bounds one line of an export: a job.json, a prompt of at
// most job.MaxPromptSize as a JSON string (a JSON prompt's escaping at
// most doubles it; one that is not UTF-8 is in base64), and a history of
// at most job.MaxEventsSize, with room to spare. export never writes a
// longer line (it reports the job instead), and import refuses one
// without keeping it in memory.
const MaxExportLine = 2*job.MaxPromptSize + job.MaxEventsSize + job.MaxJobFileSize + 64<<10

// ExportRecord is one line of farroctl export: a job's job.json fields,
// its prompt and its history. Nothing of the spool's internals (locks,
// directories, control files) is in it.
type ExportRecord struct {
	Format int `json:"farro_export"`
	*job.Job
	// Prompt is prompt.json exactly as stored, as a string; a prompt
	// that is not UTF-8 is in PromptBase64 instead.
	Prompt       string `json:"prompt,omitempty"`
	PromptBase64 string `json:"prompt_base64,omitempty"`
	// History is the job's events.jsonl, oldest first.
	History []job.Event `json:"history"`
	// Running: the job was in-progress when exported (its agent, claim
	// token and attempt as they were). Its claim stays with that agent:
	// import makes it stale.
	Running    bool      `json:"running,omitempty"`
	ExportedAt time.Time `json:"exported_at"`

	unreadableEvents int // lines of events.jsonl that could not be read (a torn last line)
}

// promptBytes is the record's prompt as stored.
func (r *ExportRecord) promptBytes() ([]byte, error) {
	if r.PromptBase64 != "" {
		return base64.StdEncoding.DecodeString(r.PromptBase64)
	}
	return []byte(r.Prompt), nil
}

// ExportOptions are export's flags.
type ExportOptions struct {
	States []string // state names (or directories), comma-separated or repeated; empty: every state
	Output string   // a file, or "" or "-" for stdout
}

// Export writes every job of the spool (of o.States) as JSON Lines, one
// ExportRecord per job, state by state, in ID order. A file is written
// whole or not at all (a temp file beside it, fsynced, renamed, the
// directory fsynced). A job that cannot be read is reported on one line
// and left out, the others exported, and the exit status is 1.
func (c *Ctl) Export(o ExportOptions) error {
	var states []job.State
	for _, name := range o.States {
		for _, part := range strings.Split(name, ",") {
			st, ok := ParseState(part)
			if !ok {
				return Usagef("unknown state %q (one of %s)", part, stateNames())
			}
			if !slices.Contains(states, st) {
				states = append(states, st)
			}
		}
	}
	slices.SortFunc(states, func(a, b job.State) int { // the lifecycle's order
		return slices.Index(job.States, a) - slices.Index(job.States, b)
	})
	s, err := c.existing()
	if err != nil {
		return err
	}
	entries, err := walk(s, states)
	if err != nil {
		return err
	}
	out, commit, abort, err := c.exportOutput(o.Output)
	if err != nil {
		return err
	}
	defer abort()
	at := c.now()
	seen := map[string]bool{}
	n, running, bad := 0, 0, 0
	var line bytes.Buffer
	enc := json.NewEncoder(&line)
	enc.SetEscapeHTML(false)
	for _, e := range entries {
		if e.Hostile {
			c.warnf("export: %s: not a job directory (a symlink or a file); left out (farroctl fsck)", e.Path)
			bad++
			continue
		}
		if seen[e.Name] {
			continue // moved meanwhile, and exported where it was found first
		}
		rec, err := exportJob(s, e, at)
		if err != nil {
			c.warnf("export: %s: %s; left out", e.Name, oneLine(err.Error()))
			bad++
			continue
		}
		seen[rec.ID] = true
		if rec.unreadableEvents > 0 {
			// A torn last line (a crash mid-append): the state is
			// job.json's; the readable transitions are exported.
			c.warnf("export: %s: %d unreadable line(s) of %s left out of its history", rec.ID, rec.unreadableEvents, job.EventsFile)
		}
		line.Reset()
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("export: %s: %w", rec.ID, err)
		}
		if line.Len() > MaxExportLine {
			c.warnf("export: %s: its line is %d bytes, over the limit of %d; left out", rec.ID, line.Len(), MaxExportLine)
			bad++
			continue
		}
		if _, err := out.Write(line.Bytes()); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		n++
		if rec.Running {
			running++
		}
	}
	if err := commit(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if o.Output != "" && o.Output != "-" {
		fmt.Fprintf(c.Stdout, "exported %d job(s) to %s\n", n, o.Output)
	}
	if running > 0 {
		c.warnf("export: %d job(s) were running (in-progress): import makes them stale and managerd requeues them; stop their agents (agentd --drain) before starting agents on the database", running)
	}
	if bad > 0 {
		return silent("export: %d job(s) left out", bad)
	}
	return nil
}

// exportJob reads the job at e (found again if it moved since the walk).
func exportJob(s *job.Spool, e entry, at time.Time) (*ExportRecord, error) {
	dir, state := e.Path, e.State
	j, err := job.ReadJob(dir)
	if errors.Is(err, fsq.ErrVanished) {
		locs, lerr := s.Locate(e.Name)
		if lerr != nil {
			return nil, fmt.Errorf("moved while exported, and not found again: %w", lerr)
		}
		dir, state = locs[0].Dir, locs[0].State
		j, err = job.ReadJob(dir)
	}
	if err != nil {
		return nil, err
	}
	if j.Status != state {
		return nil, fmt.Errorf("its status %s disagrees with its directory %s (farroctl fsck)", j.Status, dir)
	}
	p, err := job.ReadPrompt(dir)
	if err != nil {
		return nil, err
	}
	evs, badEvents, err := job.ReadEvents(dir)
	if err != nil {
		return nil, err
	}
	rec := &ExportRecord{Format: ExportFormat, Job: j, History: evs, Running: j.Status == job.InProgress,
		ExportedAt: at, unreadableEvents: badEvents}
	if rec.History == nil {
		rec.History = []job.Event{}
	}
	if utf8.Valid(p) {
		rec.Prompt = string(p)
	} else {
		rec.PromptBase64 = base64.StdEncoding.EncodeToString(p)
	}
	return rec, nil
}

// exportOutput opens where the export goes: stdout, or a temp file
// beside path that commit makes path durably (abort removes it).
func (c *Ctl) exportOutput(path string) (w io.Writer, commit func() error, abort func(), err error) {
	if path == "" || path == "-" {
		return c.Stdout, func() error { return nil }, func() {}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("export: %w", err)
	}
	done := false
	abort = func() {
		if !done {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}
	commit = func() error {
		if err := f.Sync(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := os.Rename(f.Name(), path); err != nil {
			return err
		}
		done = true
		return fsq.SyncDir(filepath.Dir(path))
	}
	return f, commit, abort, nil
}
