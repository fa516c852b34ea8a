package ctl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// Kinds farroctl accepts for --kind: the handlers agentd has.
var Kinds = []string{"exec", "noop", "crawl.fetch"}

// DefaultKind is submit's --kind default.
const DefaultKind = "exec"

// SubmitOptions are submit's flags and argument.
type SubmitOptions struct {
	ID          string
	Kind        string // "" means DefaultKind
	Priority    int
	MaxAttempts int           // 0: managerd's default, written into job.json at submit
	In          time.Duration // start deferred, not before now+In
	At          string        // start deferred, not before this RFC 3339 time
	Held        bool          // start held
	Batch       bool          // input is JSON Lines, one job per line
	Args        []string      // at most one: FILE, or "-" for stdin
}

// batchLine is one line of submit --batch. Absent fields take the value of
// the corresponding flag.
type batchLine struct {
	ID          *string         `json:"id"`
	Kind        *string         `json:"kind"`
	Priority    *int            `json:"priority"`
	MaxAttempts *int            `json:"max_attempts"`
	NotBefore   *time.Time      `json:"not_before"`
	Held        *bool           `json:"held"`
	Prompt      json.RawMessage `json:"prompt"`
}

// Submit creates jobs. Without Batch it reads one prompt (a JSON document
// of at most 1 MiB) from FILE or stdin and prints the new job's ID alone on
// stdout. Every refusal (duplicate or unsafe ID, invalid JSON, oversized
// prompt, unknown kind) happens before anything is created.
func (c *Ctl) Submit(o SubmitOptions) error {
	if len(o.Args) > 1 {
		return Usagef("submit takes at most one FILE argument, got %d", len(o.Args))
	}
	if o.Kind == "" {
		o.Kind = DefaultKind
	}
	if err := checkKind(o.Kind); err != nil {
		return err
	}
	if o.MaxAttempts < 0 {
		return Usagef("--max-attempts must be 0 (managerd's default) or more, got %d", o.MaxAttempts)
	}
	notBefore, err := c.notBefore(o)
	if err != nil {
		return err
	}
	if o.Batch {
		if o.ID != "" {
			return Usagef("--id cannot be used with --batch (give \"id\" on each line)")
		}
		return c.submitBatch(o, notBefore)
	}
	if o.ID != "" {
		if err := job.ValidateID(o.ID); err != nil {
			return UsageError(err)
		}
	}
	in, name, closeIn, err := c.input(o.Args)
	if err != nil {
		return err
	}
	defer closeIn()
	prompt, err := io.ReadAll(io.LimitReader(in, job.MaxPromptSize+1))
	if err != nil {
		return fmt.Errorf("read prompt from %s: %w", name, err)
	}
	if err := checkPrompt(prompt); err != nil {
		return UsageError(fmt.Errorf("%s: %w", name, err))
	}
	d, done, err := c.door(true)
	if err != nil {
		return err
	}
	defer done()
	if o.MaxAttempts == 0 {
		// job.json says the limit that applies: managerd's, fixed now.
		o.MaxAttempts = d.defaultMaxAttempts()
	}
	if o.ID != "" {
		// Refuse a known duplicate before building anything in tmp/;
		// Submit checks again, race-free, under the job's lock.
		if loc, err := d.locate(o.ID); err == nil {
			return &Error{Code: ExitFail, Err: fmt.Errorf("submit %s: %w (in %s)", o.ID, job.ErrDuplicate, loc.State)}
		}
	}
	jobs, errs := d.submit([]job.SubmitRequest{{
		ID: o.ID, Kind: o.Kind, Priority: o.Priority, MaxAttempts: o.MaxAttempts,
		NotBefore: notBefore, Held: o.Held, Prompt: prompt, Actor: Actor,
	}})
	if errs[0] != nil {
		return submitError(errs[0])
	}
	fmt.Fprintln(c.Stdout, jobs[0].ID)
	d.audit(job.Audit{Command: "submit", JobIDs: []string{jobs[0].ID}})
	return nil
}

// notBefore turns --in / --at into a time (zero: start now).
func (c *Ctl) notBefore(o SubmitOptions) (time.Time, error) {
	if o.In != 0 && o.At != "" {
		return time.Time{}, Usagef("--in and --at are exclusive")
	}
	if o.Held && (o.In != 0 || o.At != "") {
		return time.Time{}, Usagef("--held cannot be combined with --in or --at (a released job is queued at once)")
	}
	switch {
	case o.In < 0:
		return time.Time{}, Usagef("--in must not be negative, got %s", o.In)
	case o.In > 0:
		return c.now().Add(o.In), nil
	case o.At != "":
		t, err := time.Parse(time.RFC3339, o.At)
		if err != nil {
			return time.Time{}, Usagef("--at %q is not an RFC 3339 time (e.g. 2026-11-21T18:00:00Z)", o.At)
		}
		return t.UTC(), nil
	}
	return time.Time{}, nil
}

// input opens FILE, or stdin for no argument or "-".
func (c *Ctl) input(args []string) (io.Reader, string, func(), error) {
	if len(args) == 0 || args[0] == "-" {
		in := c.Stdin
		if in == nil {
			in = strings.NewReader("")
		}
		return in, "stdin", func() {}, nil
	}
	f, err := os.Open(args[0])
	if err != nil {
		return nil, "", nil, UsageError(fmt.Errorf("input: %w", err))
	}
	return f, args[0], func() { f.Close() }, nil
}

func checkKind(kind string) error {
	for _, k := range Kinds {
		if kind == k {
			return nil
		}
	}
	return Usagef("unknown kind %q (known: %s)", kind, strings.Join(Kinds, ", "))
}

// checkPrompt refuses what Spool.Submit would refuse, before anything is
// created, with a message an operator can act on.
func checkPrompt(p []byte) error {
	if len(p) > job.MaxPromptSize {
		return fmt.Errorf("prompt is over the limit of %d bytes (1 MiB)", job.MaxPromptSize)
	}
	if len(bytes.TrimSpace(p)) == 0 {
		return errors.New("prompt is empty: give a JSON document (e.g. {})")
	}
	if !json.Valid(p) {
		var v any
		err := json.Unmarshal(p, &v)
		if err == nil {
			err = errors.New("not a single JSON document")
		}
		return fmt.Errorf("prompt is not valid JSON: %v", err)
	}
	return nil
}

// submitError classifies Spool.Submit's errors: a duplicate is an
// operational refusal (exit 1); anything Submit finds invalid is input.
func submitError(err error) error {
	if errors.Is(err, job.ErrDuplicate) {
		return &Error{Code: ExitFail, Err: err}
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "invalid ") || strings.HasPrefix(msg, "prompt ") || strings.HasPrefix(msg, "max attempts") {
		return UsageError(err)
	}
	return err
}

// maxBatchLine bounds one line of --batch input: a maximal prompt plus its
// envelope.
const maxBatchLine = job.MaxPromptSize + 64<<10

// submitBatchChunk is how many lines of --batch input share one
// SubmitMany (two group-commit barriers).
const submitBatchChunk = 256

// submitBatch reads JSON Lines, submits one job per line and prints one
// ID per submitted job, in input order. Each line is independent: a bad
// line is reported on stderr ("line N: reason") and the others are still
// submitted; the exit code is then 1. Lines are submitted in chunks
// (job.Spool.SubmitMany), so a chunk's jobs share their fsyncs; an ID is
// printed only once its job is durable.
func (c *Ctl) submitBatch(o SubmitOptions, notBefore time.Time) error {
	in, name, closeIn, err := c.input(o.Args)
	if err != nil {
		return err
	}
	defer closeIn()
	var d door
	closeDoor := func() {}
	defer func() { closeDoor() }()
	var def int // the attempt limit of lines without one (defaultMaxAttempts)
	// A chunk of lines, reported in input order once submitted.
	type item struct {
		line int
		req  job.SubmitRequest
		job  *job.Job
		err  error
	}
	var chunk []item
	var ids auditIDs
	n, failed, done := 0, 0, 0
	flush := func() error {
		var reqs []job.SubmitRequest
		var at []int
		for i, it := range chunk {
			if it.err == nil {
				reqs, at = append(reqs, it.req), append(at, i)
			}
		}
		if len(reqs) > 0 {
			if d == nil {
				dd, done, err := c.door(true)
				if err != nil {
					return err
				}
				d, def, closeDoor = dd, dd.defaultMaxAttempts(), done
			}
			for i := range reqs {
				if reqs[i].MaxAttempts == 0 {
					reqs[i].MaxAttempts = def // job.json says the limit that applies
				}
			}
			jobs, errs := d.submit(reqs)
			for k, i := range at {
				chunk[i].job, chunk[i].err = jobs[k], errs[k]
			}
		}
		for _, it := range chunk {
			if it.err != nil {
				failed++
				c.warnf("line %d: %v", it.line, it.err)
				continue
			}
			done++
			ids.add(it.job.ID)
			fmt.Fprintln(c.Stdout, it.job.ID)
		}
		chunk = chunk[:0]
		return nil
	}
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(r, maxBatchLine)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read %s: %w", name, err)
		}
		if line == nil && errors.Is(err, io.EOF) {
			break
		}
		n++
		switch {
		case tooLong:
			chunk = append(chunk, item{line: n, err: fmt.Errorf("longer than %d bytes", maxBatchLine)})
		case len(bytes.TrimSpace(line)) == 0:
		default:
			req, perr := c.batchRequest(line, o, notBefore)
			chunk = append(chunk, item{line: n, req: req, err: perr})
		}
		if len(chunk) == submitBatchChunk {
			if ferr := flush(); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if d != nil {
		d.audit(job.Audit{Command: "submit --batch", JobIDs: ids.ids, Count: ids.count, Failed: failed})
	}
	if failed > 0 {
		return silent("submit --batch: %d of %d jobs refused", failed, failed+done)
	}
	return nil
}

func (c *Ctl) batchRequest(line []byte, o SubmitOptions, notBefore time.Time) (job.SubmitRequest, error) {
	var bl batchLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&bl); err != nil {
		return job.SubmitRequest{}, fmt.Errorf("not a valid job line: %v", err)
	}
	if dec.More() {
		return job.SubmitRequest{}, errors.New("not a valid job line: more than one JSON value")
	}
	if len(bl.Prompt) == 0 || string(bl.Prompt) == "null" {
		return job.SubmitRequest{}, errors.New(`no "prompt"`)
	}
	req := job.SubmitRequest{
		Kind: o.Kind, Priority: o.Priority, MaxAttempts: o.MaxAttempts,
		NotBefore: notBefore, Held: o.Held, Prompt: bl.Prompt, Actor: Actor,
	}
	if bl.ID != nil {
		if err := job.ValidateID(*bl.ID); err != nil {
			return req, err
		}
		req.ID = *bl.ID
	}
	if bl.Kind != nil {
		if err := checkKind(*bl.Kind); err != nil {
			return req, err
		}
		req.Kind = *bl.Kind
	}
	if bl.Priority != nil {
		req.Priority = *bl.Priority
	}
	if bl.MaxAttempts != nil {
		if *bl.MaxAttempts < 0 {
			return req, fmt.Errorf("max_attempts must be 0 or more, got %d", *bl.MaxAttempts)
		}
		req.MaxAttempts = *bl.MaxAttempts
	}
	if bl.NotBefore != nil {
		req.NotBefore = bl.NotBefore.UTC()
	}
	if bl.Held != nil {
		req.Held = *bl.Held
	}
	if req.Held && req.NotBefore.After(c.now()) {
		return req, errors.New("held cannot be combined with a future not_before")
	}
	if err := checkPrompt(bl.Prompt); err != nil {
		return req, err
	}
	return req, nil
}

// readLine returns the next line without its newline, at most max bytes;
// a longer line is consumed and reported with tooLong. At the end of input
// it returns io.EOF, with the last unterminated line if there is one.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		frag, isPrefix, rerr := r.ReadLine()
		if rerr != nil {
			if line != nil || tooLong {
				return line, tooLong, io.EOF
			}
			return nil, false, rerr
		}
		if !tooLong {
			if len(line)+len(frag) > max {
				tooLong, line = true, []byte{}
			} else {
				line = append(line, frag...)
			}
		}
		if !isPrefix {
			if line == nil {
				line = []byte{}
			}
			return line, tooLong, nil
		}
	}
}
