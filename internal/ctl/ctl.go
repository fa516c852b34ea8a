// Package ctl is farroctl's logic: the operator commands over a spool
// (submit, ls, show, stats, hold/release/cancel/requeue/kill, fsck). It
// moves jobs only through pkg/job's transactions, so an operator never
// races an agent: non-running jobs are moved under their claim lock
// (Spool.Move), running ones are asked to stop through control.json.
// With Store a postgres:// URL, the job commands (StoreCommands) work on
// that database instead, through pkg/store only (door.go, store.go).
//
// Every command writes its results to Stdout and its per-item problems to
// Stderr, and returns an error whose exit code (ExitCode) is 0 for success,
// 1 for an operational failure and 2 for a usage error or invalid input.
package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// Exit codes of farroctl.
const (
	ExitOK    = 0 // success; fsck: the spool is clean (or fully repaired)
	ExitFail  = 1 // operational error: not found, duplicate, busy, I/O, fsck findings
	ExitUsage = 2 // usage error or invalid input (bad flag, unsafe ID, invalid JSON, ...)
)

// Actor is the name farroctl acts under in locks, events and control files.
const Actor = "farroctl"

// Error is an error with an exit code. Silent errors have already been
// reported (line by line on stderr) and are not printed again.
type Error struct {
	Code   int
	Err    error
	Silent bool
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Usagef returns an invalid-input error (exit 2).
func Usagef(format string, args ...any) error {
	return &Error{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// UsageError marks err as a usage error (exit 2).
func UsageError(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: ExitUsage, Err: err}
}

// silent is an operational failure already reported on stderr.
func silent(format string, args ...any) error {
	return &Error{Code: ExitFail, Err: fmt.Errorf(format, args...), Silent: true}
}

// ExitCode maps err to farroctl's exit code: 0 for nil, the code of an
// *Error, 1 otherwise.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitFail
}

// IsSilent reports whether err has already been reported.
func IsSilent(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Silent
}

// Ctl runs operator commands over the spool at Root.
type Ctl struct {
	Root string // spool directory, as given by --spool
	// Store is --store (or FARRO_STORE): a postgres:// URL makes the
	// commands that support it (StoreCommands) work on that database
	// instead of the spool at Root.
	Store  string
	Stdin  io.Reader // submit's input when no FILE is given (or "-")
	Stdout io.Writer
	Stderr io.Writer
	Now    func() time.Time // nil: time.Now

	// pool, when set (OpenStorePool), is the connection pool every
	// command of this Ctl uses on Store, instead of one of its own; ctx
	// (WithContext) then bounds their work.
	pool *storePool
	ctx  context.Context
}

func (c *Ctl) now() time.Time {
	if c.Now != nil {
		return c.Now().UTC()
	}
	return time.Now().UTC()
}

// warnf prints one problem line on stderr, prefixed like every farroctl
// message.
func (c *Ctl) warnf(format string, args ...any) {
	fmt.Fprintf(c.Stderr, "farroctl: "+format+"\n", args...)
}

// existing returns the spool at Root without creating anything: commands
// that only read (ls, show, stats, fsck without --repair) must not build a
// spool where there is none. Root must be a spool (hold incoming/): a
// mistyped --spool is refused, never taken for an empty queue (only
// `farroctl init` makes a spool).
func (c *Ctl) existing() (*job.Spool, error) {
	abs, err := filepath.Abs(c.Root)
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", c.Root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("spool %s does not exist (set --spool or FARRO_SPOOL, or create it with `farroctl init %s`)", abs, abs)
		}
		return nil, fmt.Errorf("spool %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("spool %s is not a directory", abs)
	}
	ok, err := job.IsSpool(abs)
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", abs, err)
	}
	if !ok {
		return nil, fmt.Errorf("spool %s: %w: it has no incoming/ (set --spool or FARRO_SPOOL, or create one with `farroctl init %s`)", abs, job.ErrNotSpool, abs)
	}
	return &job.Spool{Root: abs}, nil
}

// Init makes a spool at dir (Root when dir is empty): the directory and
// its layout, durably. An existing spool is left as it is; a directory
// that holds anything else is refused (job.ErrNotSpool).
func (c *Ctl) Init(dir string) error {
	if dir == "" {
		dir = c.Root
	}
	s, err := job.Open(dir, job.Existing())
	if errors.Is(err, job.ErrNotSpool) {
		if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
			s, err = job.Open(dir)
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.Stdout, "spool %s ready\n", s.Root)
	return nil
}

// open returns the spool at Root, which must exist, completing its layout
// if a directory is missing (commands that move jobs need every state
// directory).
func (c *Ctl) open() (*job.Spool, error) {
	s, err := c.existing()
	if err != nil {
		return nil, err
	}
	return job.Open(s.Root)
}
