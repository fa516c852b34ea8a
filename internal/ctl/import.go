package ctl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// ImportStats is what an import did, line by line.
type ImportStats struct {
	Imported  int // inserted
	Same      int // there already, with the same content
	Conflicts int // there already, with other content: left as they are
	Bad       int // lines refused (corrupt, too long, another format, a job the store refuses)
	Stale     int // imported ones that were running on the spool, now stale
}

// Import is farroctl import: each line of in (a file, or "" or "-" for
// stdin) is an ExportRecord, inserted into the PostgreSQL store as it
// is, one transaction per job. A job that is there already with the same
// content is skipped, so an interrupted import run again finishes the
// rest; one with other content is a conflict, reported and left alone.
// A job that was running on the spool is imported as stale, with an
// event saying so: its claim stays with its old agent, and managerd
// requeues it. Every refused line is reported with its number, the
// others imported, and the exit status is 1. A failure of the database
// stops the import (run it again to finish).
func (c *Ctl) Import(in string) error {
	if !c.OnStore() {
		return Usagef("import needs a PostgreSQL store: --store postgres://USER@HOST:PORT/DB (or FARRO_STORE); it reads what farroctl export wrote")
	}
	r := c.Stdin
	if in != "" && in != "-" {
		f, err := os.Open(in)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return fmt.Errorf("import: %s is a directory (give the file farroctl export wrote)", in)
		}
		r = f
	}
	octx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
	st, err := pgstore.Open(octx, c.Store)
	cancel()
	if err != nil {
		return fmt.Errorf("import: %s: %s", storeName(c.Store), oneLine(err.Error()))
	}
	defer st.Close()
	var s ImportStats
	err = c.importLines(st, r, &s)
	fmt.Fprintf(c.Stdout, "imported %d, already there %d, conflicts %d, refused lines %d\n", s.Imported, s.Same, s.Conflicts, s.Bad)
	if s.Stale > 0 {
		fmt.Fprintf(c.Stdout, "%d job(s) were running on the spool: now stale, managerd requeues them (their handlers on the old spool's host must be stopped)\n", s.Stale)
	}
	if err != nil {
		return err
	}
	if s.Conflicts+s.Bad > 0 {
		return silent("import: %d conflict(s), %d refused line(s)", s.Conflicts, s.Bad)
	}
	return nil
}

func (c *Ctl) importLines(st store.Importer, r io.Reader, s *ImportStats) error {
	lr := lineReader{r: bufio.NewReaderSize(r, 64<<10), max: MaxExportLine}
	for {
		line, tooLong, err := lr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("import: line %d: %w (the lines before it are imported; run the same import again to finish)", lr.n, err)
		}
		n := lr.n
		if tooLong {
			c.warnf("import: line %d: longer than %d bytes; refused unread", n, MaxExportLine)
			s.Bad++
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		rec, err := parseExportLine(line)
		if err != nil {
			c.warnf("import: line %d: %s", n, oneLine(err.Error()))
			s.Bad++
			continue
		}
		ir, running, err := importRecord(rec)
		if err != nil {
			c.warnf("import: line %d: %s: %s", n, rec.ID, oneLine(err.Error()))
			s.Bad++
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), StoreTimeout)
		res, err := st.Import(ctx, ir)
		cancel()
		switch {
		case errors.Is(err, store.ErrImportRefused):
			c.warnf("import: line %d: %s: %s", n, rec.ID, jobErr(err, rec.ID))
			s.Bad++
		case errors.Is(err, job.ErrDuplicate):
			c.warnf("import: line %d: %s: conflict: %s; left as it is", n, rec.ID, jobErr(err, rec.ID))
			s.Conflicts++
		case err != nil:
			return fmt.Errorf("import: line %d: %s (the lines before it are imported; run the same import again to finish)", n, oneLine(err.Error()))
		case res == store.ImportSame:
			s.Same++
		default:
			s.Imported++
			if running {
				s.Stale++
				fmt.Fprintf(c.Stdout, "%s: was running on the spool (agent %s, attempt %d): imported as stale\n", rec.ID, rec.Agent, rec.Attempts)
			}
		}
	}
}

// jobErr is err of job id on one line, without the id the line names
// already.
func jobErr(err error, id string) string {
	msg := oneLine(err.Error())
	for _, p := range []string{"import " + id + ": ", "import: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// parseExportLine decodes one line of an export.
func parseExportLine(line []byte) (*ExportRecord, error) {
	var rec ExportRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		return nil, fmt.Errorf("not a line of farroctl export: %v", err)
	}
	if rec.Format != ExportFormat {
		return nil, fmt.Errorf("export format %d, this build reads %d (farro_export)", rec.Format, ExportFormat)
	}
	if rec.Job == nil || rec.ID == "" {
		return nil, errors.New("no job id")
	}
	return &rec, nil
}

// importRecord is what rec imports as: the job as it is, or, for a job
// that was running, stale as of the export with an event saying why (so
// that the same line always imports the same job). running says which.
func importRecord(rec *ExportRecord) (store.ImportRecord, bool, error) {
	p, err := rec.promptBytes()
	if err != nil {
		return store.ImportRecord{}, false, fmt.Errorf("prompt_base64: %v", err)
	}
	j, hist := rec.Job.Clone(), append([]job.Event(nil), rec.History...)
	running := j.Status == job.InProgress
	if running {
		at := rec.ExportedAt
		if at.IsZero() {
			at = j.UpdatedAt
		}
		at = at.UTC()
		why := fmt.Sprintf("imported from a spool while running on agent %s; its claim stays there", j.Agent)
		hist = append(hist, job.Event{Time: at, Actor: Actor, From: job.InProgress, To: job.Stale,
			Attempt: j.Attempts, Reason: why, CorrelationID: j.CorrelationID})
		j.Status, j.Reason, j.UpdatedAt, j.FinishedAt = job.Stale, why, at, &at
	}
	return store.ImportRecord{Job: j, Prompt: p, History: hist}, running, nil
}

// lineReader reads lines of at most max bytes; a longer one is skipped
// without being kept in memory.
type lineReader struct {
	r   *bufio.Reader
	max int
	n   int // the number of the line last returned
}

// next returns the next line without its newline (the last one may have
// none), or tooLong for a line over max, or io.EOF.
func (lr *lineReader) next() (line []byte, tooLong bool, err error) {
	var buf []byte
	started := false
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if len(chunk) > 0 && !started {
			started = true
			lr.n++
		}
		if !tooLong {
			switch n := len(buf) + len(chunk); {
			case n > lr.max+1:
				tooLong, buf = true, nil
			case n > cap(buf):
				// Doubling, not append's growth: what a line costs in
				// allocations stays within twice its length.
				nb := make([]byte, len(buf), min(max(2*cap(buf), n), lr.max+1))
				copy(nb, buf)
				buf = append(nb, chunk...)
			default:
				buf = append(buf, chunk...)
			}
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(buf, []byte("\n")), tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && started:
			return buf, tooLong, nil
		default:
			return nil, false, err
		}
	}
}
