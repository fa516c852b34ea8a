package ctl

import (
	"bytes"
	"context"
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
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
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
	if c.OnStore() {
		return c.exportStore(states, o)
	}
	s, err := c.existing()
	if err != nil {
		return err
	}
	entries, err := walk(s, states)
	if err != nil {
		return err
	}
	w, err := c.newExportWriter(o.Output)
	if err != nil {
		return err
	}
	defer w.abort()
	at := c.now()
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Hostile {
			c.warnf("export: %s: not a job directory (a symlink or a file); left out (farroctl fsck)", e.Path)
			w.bad++
			continue
		}
		if seen[e.Name] {
			continue // moved meanwhile, and exported where it was found first
		}
		rec, err := exportJob(s, e, at)
		if err != nil {
			c.warnf("export: %s: %s; left out", e.Name, oneLine(err.Error()))
			w.bad++
			continue
		}
		seen[rec.ID] = true
		if rec.unreadableEvents > 0 {
			// A torn last line (a crash mid-append): the state is
			// job.json's; the readable transitions are exported.
			c.warnf("export: %s: %d unreadable line(s) of %s left out of its history", rec.ID, rec.unreadableEvents, job.EventsFile)
		}
		if err := w.write(rec); err != nil {
			return err
		}
	}
	return w.finish(o.Output)
}

// exportWriter writes an export's lines and counts them.
type exportWriter struct {
	c               *Ctl
	out             io.Writer
	commit          func() error
	abort           func()
	line            bytes.Buffer
	enc             *json.Encoder
	n, running, bad int
}

func (c *Ctl) newExportWriter(output string) (*exportWriter, error) {
	out, commit, abort, err := c.exportOutput(output)
	if err != nil {
		return nil, err
	}
	w := &exportWriter{c: c, out: out, commit: commit, abort: abort}
	w.enc = json.NewEncoder(&w.line)
	w.enc.SetEscapeHTML(false)
	return w, nil
}

// write writes rec's line; one over MaxExportLine is reported and left
// out (counted in bad).
func (w *exportWriter) write(rec *ExportRecord) error {
	w.line.Reset()
	if err := w.enc.Encode(rec); err != nil {
		return fmt.Errorf("export: %s: %w", rec.ID, err)
	}
	if w.line.Len() > MaxExportLine {
		w.c.warnf("export: %s: its line is %d bytes, over the limit of %d; left out", rec.ID, w.line.Len(), MaxExportLine)
		w.bad++
		return nil
	}
	if _, err := w.out.Write(w.line.Bytes()); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	w.n++
	if rec.Running {
		w.running++
	}
	return nil
}

// finish makes the output durable and says what was written.
func (w *exportWriter) finish(output string) error {
	if err := w.commit(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if output != "" && output != "-" {
		fmt.Fprintf(w.c.Stdout, "exported %d job(s) to %s\n", w.n, output)
	}
	if w.running > 0 {
		w.c.warnf("export: %d job(s) were running (in-progress): import makes them stale and managerd requeues them; stop their agents (agentd --drain) before starting agents where the jobs go", w.running)
	}
	if w.bad > 0 {
		return silent("export: %d job(s) left out", w.bad)
	}
	return nil
}

// ExportPage is how many jobs of one state an export from a database
// lists at a time.
const ExportPage = 500

// exportStore is Export on a database: the jobs of states (every state
// when empty), state by state in the lifecycle's order, each state in ID
// order, read through the job store a page at a time; each job's prompt
// and history are read as it is written. A job removed or moved while
// the export runs is written as it was listed, or left out if it is
// gone; as on a spool, export a drained queue.
func (c *Ctl) exportStore(states []job.State, o ExportOptions) error {
	if len(states) == 0 {
		states = job.States
	}
	st, err := pgstore.Open(context.Background(), c.Store, pgstore.WithMaxConns(2))
	if err != nil {
		return fmt.Errorf("%s: %s", storeName(c.Store), oneLine(err.Error()))
	}
	defer st.Close()
	w, err := c.newExportWriter(o.Output)
	if err != nil {
		return err
	}
	defer w.abort()
	at := c.now()
	for _, state := range states {
		after := ""
		for {
			var page []*job.Job
			ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
			err := st.List(ctx, store.Filter{States: []job.State{state}, AfterID: after, Limit: ExportPage}, func(j *job.Job) error {
				page = append(page, j)
				return nil
			})
			cancel()
			if err != nil {
				return fmt.Errorf("export: %s: %s", storeName(c.Store), oneLine(err.Error()))
			}
			for _, j := range page {
				rec, err := exportStoreJob(st, j, at)
				if errors.Is(err, job.ErrNotFound) {
					continue // removed since the listing
				}
				if err != nil {
					return fmt.Errorf("export: %s: %s", j.ID, oneLine(err.Error()))
				}
				if err := w.write(rec); err != nil {
					return err
				}
			}
			if len(page) < ExportPage {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	return w.finish(o.Output)
}

// exportStoreJob is j's record: its prompt and history read from st.
func exportStoreJob(st store.Store, j *job.Job, at time.Time) (*ExportRecord, error) {
	ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
	defer cancel()
	p, err := st.Prompt(ctx, j.ID)
	if err != nil {
		return nil, err
	}
	evs, err := st.History(ctx, j.ID)
	if err != nil {
		return nil, err
	}
	return newExportRecord(j, p, evs, at), nil
}

// newExportRecord is the line of job j with prompt p and history evs.
func newExportRecord(j *job.Job, p []byte, evs []job.Event, at time.Time) *ExportRecord {
	rec := &ExportRecord{Format: ExportFormat, Job: j, History: evs, Running: j.Status == job.InProgress, ExportedAt: at}
	if rec.History == nil {
		rec.History = []job.Event{}
	}
	if utf8.Valid(p) {
		rec.Prompt = string(p)
	} else {
		rec.PromptBase64 = base64.StdEncoding.EncodeToString(p)
	}
	return rec
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
	rec := newExportRecord(j, p, evs, at)
	rec.unreadableEvents = badEvents
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
