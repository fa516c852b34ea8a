package store

import (
	"context"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// What follows are optional interfaces: a Store offers them when it can,
// and a caller asks with a type assertion. Nothing that only needs jobs
// relies on them.

// Dirs is offered by a store whose jobs are directories on this host (the
// spool store). It is the spool's side of a result channel: a handler may
// leave an artifact in its job's directory (a crawl fetch's result.json),
// and whoever reads the artifact finds the directory here, never by
// composing paths. A database store offers no Dirs: there an artifact
// has to travel with the job (docs/POSTGRES.md, "Later").
type Dirs interface {
	// GetDir is Get, with where the job is: its state, its agent (when
	// in-progress) and its directory. hint, when not empty, is the
	// state the caller believes the job is in (a Finished told it): it
	// is looked at first. loc is set whenever the job was found, also
	// when its job.json could not be read (err says why); a job found
	// nowhere is job.ErrNotFound with a zero loc.
	GetDir(ctx context.Context, id string, hint job.State) (j *job.Job, loc job.Location, err error)
}

// Finished is a wake-up from a FinishWatcher: job ID reached State
// (succeeded or killed), or, with Rescan, wake-ups may have been lost
// (and at the start): look again at every job waited for.
type Finished struct {
	ID     string
	State  job.State
	Rescan bool
}

// WatchOptions configures FinishWatcher.WatchFinished.
type WatchOptions struct {
	// Rescan is the period of the Rescan wake-ups sent even when none
	// was lost (default 10s).
	Rescan time.Duration
	// Coalesce, when positive, lets wake-ups gather that long before
	// they are read: a busy store wakes the waiter in batches.
	Coalesce time.Duration
	// OnFallback, if set, is called when the store cannot watch (its
	// wake-ups then are only the periodic Rescans).
	OnFallback func(error)
}

// FinishWatcher is offered by a store that can wake a waiter when jobs
// finish (the spool store: inotify on succeeded/ and killed/). It is a
// wake-up only: a waiter that has no FinishWatcher, or that got a
// Rescan, looks its jobs up again (Get), which works on every store.
type FinishWatcher interface {
	// WatchFinished sends wake-ups until ctx is done or stop is
	// called; stop waits for the watch to end, and the channel is
	// closed then. The first wake-up is a Rescan.
	WatchFinished(ctx context.Context, o WatchOptions) (wake <-chan Finished, stop func())
}
