package ctl

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// LogsOptions are logs' flags.
type LogsOptions struct {
	Attempt int  // the attempt whose output is printed; 0: the latest
	Stdout  bool // print stdout (alone: unlabelled)
	Stderr  bool // print stderr (alone: unlabelled)
}

// Logs prints job id's output: the files its handler's stdout and stderr
// went to, stdout.<N>.log and stderr.<N>.log, of the latest attempt
// (o.Attempt: another one), wherever the job is, running included. Both
// streams by default, each under a "==> stdout, attempt N <==" label; one
// stream alone is printed as it is. A running job's output is printed as
// far as it was written when the file was opened. A job without that
// attempt's output, or whose file is not a regular file, is a one-line
// error (exit 1).
func (c *Ctl) Logs(args []string, o LogsOptions) error {
	if len(args) != 1 {
		return Usagef("logs takes exactly one job ID, got %d", len(args))
	}
	id := args[0]
	if err := job.ValidateID(id); err != nil {
		return UsageError(err)
	}
	if o.Attempt < 0 {
		return Usagef("--attempt counts from 1, got %d", o.Attempt)
	}
	streams := []string{job.Stdout, job.Stderr}
	if o.Stdout != o.Stderr {
		streams = streams[:1]
		if o.Stderr {
			streams = []string{job.Stderr}
		}
	}
	if c.OnStore() {
		return c.storeLogs(id, o.Attempt, streams)
	}
	s, err := c.existing()
	if err != nil {
		return err
	}
	if id, err = c.resolveOne(s, id); err != nil { // a unique prefix stands for its job
		return err
	}
	// The job may move (a commit, a retry) between locating it and opening
	// its files: locate it again then. An open file stays readable
	// wherever its directory goes.
	var files []*os.File
	var sizes []int64
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	attempt := o.Attempt
	for try := 0; ; try++ {
		locs, err := s.LocateSettled(id, Actor)
		if err != nil {
			return err
		}
		if len(locs) > 1 {
			return fmt.Errorf("%s: found in %d places; run farroctl fsck", id, len(locs))
		}
		dir := locs[0].Dir
		var moved bool
		attempt, files, sizes, moved, err = openLogs(dir, o.Attempt, streams)
		if moved && try < 5 {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if attempt < 0 {
			return fmt.Errorf("%s: no output yet (%s, %s)", id, locs[0].State, ranText(dir))
		}
		break
	}
	return c.printLogs(id, attempt, streams, files, sizes)
}

// printLogs prints the output files of attempt of job id, opened by
// openLogs: one stream as it is, both each under its label.
func (c *Ctl) printLogs(id string, attempt int, streams []string, files []*os.File, sizes []int64) error {
	if len(streams) == 1 {
		if files[0] == nil {
			return fmt.Errorf("%s: attempt %d has no %s file", id, attempt, streams[0])
		}
		return copyLog(c.Stdout, files[0], sizes[0])
	}
	for i, st := range streams {
		if i > 0 {
			fmt.Fprintln(c.Stdout)
		}
		label := st + ", attempt " + strconv.Itoa(attempt)
		if attempt == 0 {
			label = job.OutputName(st, 0) + ", written before per-attempt output"
		}
		if files[i] == nil {
			fmt.Fprintf(c.Stdout, "==> %s: no file <==\n", label)
			continue
		}
		fmt.Fprintf(c.Stdout, "==> %s <==\n", label)
		lw := &lastByte{w: c.Stdout}
		if err := copyLog(lw, files[i], sizes[i]); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if lw.last != 0 && lw.last != '\n' {
			fmt.Fprintln(c.Stdout)
		}
	}
	return nil
}

// openLogs opens the output files of attempt (0: the latest one there is)
// of streams in dir. attempt is -1 when dir holds no output at all; moved
// says dir vanished (the job moved: locate it again).
func openLogs(dir string, want int, streams []string) (attempt int, files []*os.File, sizes []int64, moved bool, err error) {
	have, err := job.OutputAttempts(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil, nil, true, err
		}
		return 0, nil, nil, false, err
	}
	switch {
	case want == 0 && len(have) == 0:
		return -1, nil, nil, false, nil
	case want == 0:
		attempt = have[len(have)-1]
	default:
		attempt = want
		found := false
		for _, a := range have {
			found = found || a == want
		}
		if !found {
			return 0, nil, nil, false, fmt.Errorf("no output of attempt %d (%s)", want, attemptsText(have))
		}
	}
	files, sizes = make([]*os.File, len(streams)), make([]int64, len(streams))
	for i, st := range streams {
		f, size, err := fsq.OpenRegular(filepath.Join(dir, job.OutputName(st, attempt)))
		if errors.Is(err, fs.ErrNotExist) {
			if _, derr := os.Lstat(dir); derr != nil {
				closeAll(files)
				return 0, nil, nil, true, err
			}
			continue // this stream has no file (yet)
		}
		if err != nil {
			closeAll(files)
			return 0, nil, nil, false, fmt.Errorf("%s: %w", job.OutputName(st, attempt), errors.Unwrap(err))
		}
		files[i], sizes[i] = f, size
	}
	return attempt, files, sizes, false, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// attemptsText says which attempts have output.
func attemptsText(have []int) string {
	if len(have) == 0 {
		return "it has no output yet"
	}
	var b strings.Builder
	b.WriteString("attempts with output: ")
	for i, a := range have {
		if i > 0 {
			b.WriteString(", ")
		}
		if a == 0 {
			b.WriteString("stdout.log/stderr.log (before per-attempt output)")
			continue
		}
		b.WriteString(strconv.Itoa(a))
	}
	return b.String()
}

// ranText says whether the job in dir ever ran, for "no output yet".
func ranText(dir string) string {
	j, err := job.ReadJob(dir)
	switch {
	case err != nil:
		return "job.json unreadable"
	case j.Attempts == 0:
		return "it has not run"
	default:
		return fmt.Sprintf("%d attempt(s), none with output files", j.Attempts)
	}
}

// copyLog copies the first size bytes of f (its size when opened: a file
// still being written is not chased).
func copyLog(w io.Writer, f *os.File, size int64) error {
	_, err := io.CopyN(w, f, size)
	if errors.Is(err, io.EOF) { // truncated meanwhile
		err = nil
	}
	return err
}

// lastByte remembers the last byte written through it.
type lastByte struct {
	w    io.Writer
	last byte
}

func (l *lastByte) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if n > 0 {
		l.last = p[n-1]
	}
	return n, err
}
