package agent

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/farro-dev/farro/internal/logx"
	"github.com/farro-dev/farro/pkg/job"
)

// Claiming ahead. A claim waits for one group-commit barrier (a syncfs)
// before its handler may start, and the slots' claims share it: with N
// slots at most N claims ride on one sync, so on a file system whose sync
// is a journal commit of a few milliseconds a queue of short jobs runs at
// about N jobs per sync, whatever the CPU. While the recent handlers ran
// briefly (runTimes.short), a slot therefore asks its store for up to
// aheadMax jobs at once (a spool store claims them concurrently, so that
// they share one barrier), and runs them one after the other. A job claimed ahead waits at most a few short runs;
// should it wait longer than a heartbeat period (a handler that turned out
// slow), it is heartbeated before it starts, and a claim taken away
// meanwhile is dropped (Superseded). On shutdown the slot releases what it
// has not started, without counting an attempt (like a drain).

// aheadMax is how many jobs a slot claims at once while handlers are
// short.
const aheadMax = 8

// shortRun is the handler time under which claiming ahead pays: well
// under one barrier, so that the jobs claimed together all start within
// about one sync.
const shortRun = 2 * time.Millisecond

// claimedJob is a job a slot claimed, and when.
type claimedJob struct {
	c  attempt
	at time.Time
}

// runTimes keeps an average of the recent handler times.
type runTimes struct {
	avg atomic.Int64 // nanoseconds, exponentially weighted; 0: none yet
}

func (a *Agent) noteRun(d time.Duration) {
	old := a.runs.avg.Load()
	if old == 0 {
		a.runs.avg.Store(int64(d))
		return
	}
	a.runs.avg.Store(old + (int64(d)-old)/8)
}

// short reports whether the recent handlers ran briefly.
func (r *runTimes) short() bool {
	v := r.avg.Load()
	return v > 0 && time.Duration(v) < shortRun
}

// claimBatch claims the next jobs from the store (waiting for one): one,
// or while handlers are short up to aheadMax at once (claimStore).
func (a *Agent) claimBatch(ctx context.Context) []claimedJob { return a.claimStore(ctx) }

// keepFresh heartbeats a job that waited in the slot longer than a
// heartbeat period; false: the claim was taken away meanwhile.
func (a *Agent) keepFresh(cj claimedJob) bool {
	if time.Since(cj.at) < a.cfg.Heartbeat {
		return true
	}
	err := cj.c.Heartbeat()
	if err != nil && job.Superseded(err) {
		a.log.Warn().Err(err).Str("job_id", cj.c.Envelope().Lifecycle.ID).Msg("job claimed ahead was taken away before it started")
		return false
	}
	return true
}

// releaseUnstarted gives back a job claimed ahead that the slot did not
// start: queued again, no attempt counted.
func (a *Agent) releaseUnstarted(c attempt) {
	j := c.Envelope().Lifecycle
	l := logx.ForJob(a.log, j)
	l.Transition(j, job.Queued) // it was claimed, as the release that follows says
	a.commitBehind(c, c.Envelope().Runtime.Dir, Result{}, errDrain, l, time.Now())
}
