package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/farro-dev/farro/internal/localrun"
	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// Claiming from the store, whatever it is: a spool's (SpoolStore: its
// bounded index of incoming/, the spool's lock pool and group commit) or
// PostgreSQL (one queue for agents on several hosts). A slot claims one
// job, or while the handlers run briefly (runTimes.short) up to aheadMax
// at once, of the kinds it can run now (a handler, not paused, no
// outage); when there is none it waits for news of a queued job (the
// store's WaitQueued, when it has one: a spool store's index, pgstore's
// LISTEN/NOTIFY) or for StorePoll, whichever is first, and claims again.
// A spool's claim is local (localClaim): it runs as spoolAttempt, in the
// job's own directory; any other claim runs through storeAttempt, under
// its lease.

// Store defaults (Config.Lease, Config.StorePoll).
const (
	DefaultLease     = 30 * time.Second
	defaultStorePoll = time.Second
	// storeCallMax bounds one call to the store (a heartbeat, a
	// commit): a database that does not answer is an error, retried.
	storeCallMax = 10 * time.Second
)

// queueWaiter is what a store may offer for pickup (pgstore's
// LISTEN/NOTIFY, a spool store's index).
type queueWaiter interface {
	WaitQueued(ctx context.Context, timeout time.Duration) (bool, error)
}

// lister is a store that lists the queue before its claims are the best
// (a spool store's index): Ready waits for that first listing.
type lister interface {
	Listed() <-chan struct{}
}

// waker is a store whose waiting claims can be woken (a spool store's
// index): a kind that can run again is claimed at once, not after
// StorePoll.
type waker interface{ Wake() }

// wakeClaims wakes a slot waiting for queued jobs: a kind was resumed or
// its handler is usable again, and the next claim asks for it.
func (a *Agent) wakeClaims() {
	if w, ok := a.cfg.Store.(waker); ok {
		w.Wake()
	}
}

// claimStore is claimBatch on a store: it waits for at least one claim,
// or for ctx's end (nil).
func (a *Agent) claimStore(ctx context.Context) []claimedJob {
	backoff := a.cfg.StorePoll
	for ctx.Err() == nil {
		max := 1
		if a.runs.short() {
			max = aheadMax
		}
		var cs []store.Claim
		var err error
		if kinds := a.runnableKinds(); len(kinds) > 0 {
			cs, err = a.cfg.Store.Claim(ctx, a.holder, store.ClaimOptions{Max: max, Kinds: kinds, Lease: a.cfg.Lease, PassedOver: a.parked})
		}
		if !a.byListing {
			a.rdOnce.Do(func() { close(a.ready) })
		}
		var out []claimedJob
		for _, c := range cs {
			if at := a.prepare(c); at != nil {
				out = append(out, claimedJob{c: at, at: time.Now()})
			}
		}
		if err != nil && a.durabilityLost(err) {
			return out // the claims stop (ctx is done): the slot releases these
		}
		if len(out) > 0 {
			return out
		}
		switch {
		case err != nil && ctx.Err() == nil:
			a.log.Error().Err(err).Dur("retry_in_ms", backoff).Msg("claim failed; retrying")
			a.sleep(ctx, backoff)
			backoff = min(2*backoff, 30*time.Second)
		case err == nil:
			backoff = a.cfg.StorePoll
			if w, ok := a.cfg.Store.(queueWaiter); ok {
				_, _ = w.WaitQueued(ctx, a.cfg.StorePoll)
			} else {
				a.sleep(ctx, a.cfg.StorePoll)
			}
		}
	}
	return nil
}

func (a *Agent) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// runnableKinds are the kinds a store claim may take now.
func (a *Agent) runnableKinds() []string {
	var out []string
	for _, k := range a.Kinds() {
		if a.runnable(k) {
			out = append(out, k)
		}
	}
	return out
}

// prepare makes a store's claim an attempt: its prompt goes into its
// working directory as prompt.json (where a handler reads it, as in a
// spool's job directory). A claim that cannot run here (no working
// directory, a full disk) is released at once, its attempt not counted.
func (a *Agent) prepare(c store.Claim) attempt {
	if lc, ok := c.(localClaim); ok {
		return spoolAttempt{lc}
	}
	at := &storeAttempt{c: c, prompt: c.Prompt(), local: a.cfg.Local, agent: a.cfg.ID, lease: a.cfg.Lease, renewed: time.Now()}
	err := fmt.Errorf("no working directory for the attempt on this host")
	if c.Dir() != "" {
		err = nil
		// A store that recycles working directories wrote the prompt
		// into the one it gave (pgstore: in place, before the directory
		// took the job's name).
		if p, ok := c.(interface{ PromptPlaced() bool }); !ok || !p.PromptPlaced() {
			err = localrun.WriteFile(filepath.Join(c.Dir(), job.PromptFile), at.prompt)
		}
	}
	if err == nil {
		return at
	}
	l := a.log.With().Str("job_id", c.Job().ID).Logger()
	l.Error().Err(err).Msg("claimed job cannot run on this host: released")
	ctx, cancel := context.WithTimeout(context.Background(), storeCallMax)
	defer cancel()
	if rerr := c.Commit(ctx, job.Queued, "released: "+firstLine(err.Error(), 200), func(j *job.Job) {
		j.Attempts--
		j.Agent, j.StartedAt, j.LastHeartbeat, j.ExitCode = "", nil, nil, nil
	}); rerr != nil {
		l.Error().Err(rerr).Msg("release failed: the job returns to the queue when its lease expires")
	}
	return nil
}

// storeAttempt is a store's claim as an attempt. Each call to the store
// gets storeCallMax. A lease it could not renew for a whole lease
// period counts as lost: the handler is stopped and nothing is written,
// for by then recovery may have given the job to another host.
type storeAttempt struct {
	c      store.Claim
	prompt json.RawMessage
	local  string // the host's local directory: the handler records
	agent  string
	lease  time.Duration

	mu      sync.Mutex
	renewed time.Time // the last successful renewal (or the claim)
	handler bool      // a handler record was written
}

func call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), storeCallMax)
}

func (s *storeAttempt) Envelope() job.Envelope {
	return job.Envelope{Prompt: s.prompt, Lifecycle: s.c.Job(), Runtime: job.Runtime{Dir: s.c.Dir()}}
}

func (s *storeAttempt) Heartbeat() error {
	ctx, cancel := call()
	defer cancel()
	err := s.c.Heartbeat(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.renewed = time.Now()
		return nil
	}
	if !store.Lost(err) && time.Since(s.renewed) >= s.lease {
		return fmt.Errorf("lease not renewed for %s (%v): %w", s.lease, err, job.ErrFenced)
	}
	return err
}

func (s *storeAttempt) PendingControl() (*job.Control, error) {
	ctx, cancel := call()
	defer cancel()
	return s.c.PendingControl(ctx)
}

// DropControl does nothing: the commit that follows fulfils the request
// and drops it in the same transaction.
func (s *storeAttempt) DropControl() error { return nil }

// RecordHandler records the handler on this host first (for this host's
// watchdogd, which can stop it), then in the store.
func (s *storeAttempt) RecordHandler(id proc.Identity) error {
	j := s.c.Job()
	if s.local != "" {
		err := localrun.Write(s.local, localrun.Record{JobID: j.ID, Agent: s.agent, ClaimToken: s.c.Token(),
			Attempt: j.Attempts, LeaseMS: s.lease.Milliseconds(), Handler: id, Started: time.Now().UTC()})
		if err != nil {
			return fmt.Errorf("handler record: %w", err)
		}
		s.mu.Lock()
		s.handler = true
		s.mu.Unlock()
	}
	ctx, cancel := call()
	defer cancel()
	return s.c.RecordHandler(ctx, id)
}

func (s *storeAttempt) Fence() error {
	ctx, cancel := call()
	defer cancel()
	return s.c.Fence(ctx)
}

// Commit ends the attempt. The handler has exited by then: its record on
// this host goes first.
func (s *storeAttempt) Commit(to job.State, reason string, mutate func(*job.Job)) error {
	s.mu.Lock()
	rec := s.handler
	s.handler = false
	s.mu.Unlock()
	if rec {
		_ = localrun.Remove(s.local, s.agent, s.c.Job().ID, s.c.Token()) // left behind: watchdogd removes it
	}
	ctx, cancel := call()
	defer cancel()
	return s.c.Commit(ctx, to, reason, mutate)
}

// localClaim is a claim whose job is kept on this host (a spool store's):
// its envelope names the job's own directory, where its prompt already
// is, and an operator's request is a file there that the holder removes
// once it fulfils it.
type localClaim interface {
	store.Claim
	Envelope() job.Envelope
	DropControl() error
}

// spoolAttempt is a local claim as an attempt. It holds while this agent
// lives (watchdogd judges a silent one): a failed heartbeat is only
// logged, as it always was on a spool, and there is no lease to lose.
type spoolAttempt struct{ c localClaim }

func (s spoolAttempt) Envelope() job.Envelope { return s.c.Envelope() }
func (s spoolAttempt) Heartbeat() error       { return s.c.Heartbeat(context.Background()) }
func (s spoolAttempt) PendingControl() (*job.Control, error) {
	return s.c.PendingControl(context.Background())
}
func (s spoolAttempt) DropControl() error { return s.c.DropControl() }
func (s spoolAttempt) RecordHandler(id proc.Identity) error {
	return s.c.RecordHandler(context.Background(), id)
}
func (s spoolAttempt) Fence() error { return s.c.Fence(context.Background()) }
func (s spoolAttempt) Commit(to job.State, reason string, mutate func(*job.Job)) error {
	return s.c.Commit(context.Background(), to, reason, mutate)
}
