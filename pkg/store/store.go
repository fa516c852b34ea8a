// Package store is the seam between farro's job model and the place jobs
// are kept. The model — the envelope, the states and the legal-transitions
// map, events, control requests, fencing tokens, what a claim, a commit and
// an operator's move mean — is pkg/job's, written once. A Store keeps jobs
// somewhere: pkg/store/spoolstore in a spool (a directory tree on one
// host), pkg/store/pgstore in PostgreSQL (one queue for agents on many
// hosts). Every Store passes the same conformance suite,
// pkg/store/storetest.
//
// The seam is named for what it does: submit, claim, heartbeat, commit,
// move, locate, list, recover, events. Errors are pkg/job's, whatever the
// store: job.ErrNotFound, job.ErrDuplicate, job.ErrState, job.ErrIllegal,
// job.ErrControlled, job.ErrNotExpired, job.ErrFenced (test a claim's
// errors with Lost), and ErrBusy.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/job"
)

// ErrBusy: the job is being changed by someone else right now (its lock
// is taken, its row is locked by another transaction). Nothing was
// changed; the caller may try again.
var ErrBusy = errors.New("job busy")

// IsPostgresURL reports whether spec, an operator's --store (or
// FARRO_STORE), names a PostgreSQL database (a postgres:// or
// postgresql:// URL) rather than a spool.
func IsPostgresURL(spec string) bool {
	return strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://")
}

// Lost reports whether err, from a Claim's method, says that the claim
// no longer holds its job (fenced off by a newer claim, or taken away by
// recovery). The holder stops its handler and writes nothing more.
func Lost(err error) bool { return job.Superseded(err) }

// Store keeps jobs. Its methods are safe for concurrent use.
type Store interface {
	// Submit durably creates jobs, queued (or deferred when NotBefore
	// is in the future, held when Held). jobs[i] and errs[i] are the
	// outcome of reqs[i]; a failed request does not stop the others.
	// A returned job is acknowledged: it survives any crash.
	Submit(ctx context.Context, reqs []job.SubmitRequest) (jobs []*job.Job, errs []error)

	// Claim leases up to opts.Max queued jobs to h, best first: higher
	// priority, then older (job.IDTime; created_at for an ID that
	// carries no time), then ID. Each claim moves its
	// job to in-progress with attempts+1, a new correlation id and a
	// new fencing token. A job with a pending control request for its
	// last attempt is not run: the request is applied (held or
	// killed) and the job is not returned. No claimable job is an
	// empty slice and a nil error. An error that stops the batch part
	// way is returned with the claims already taken.
	Claim(ctx context.Context, h job.Holder, opts ClaimOptions) ([]Claim, error)

	// Get returns job id's lifecycle wherever it is (job.ErrNotFound).
	Get(ctx context.Context, id string) (*job.Job, error)
	// Prompt returns job id's prompt (job.ErrNotFound).
	Prompt(ctx context.Context, id string) (json.RawMessage, error)
	// List calls fn with each job that f matches, in ID order (with
	// f.ByFinished, in the order they finished), until fn returns an
	// error (returned as is). A job changing state during the listing
	// is seen at most once.
	List(ctx context.Context, f Filter, fn func(*job.Job) error) error
	// Counts returns how many jobs each state holds.
	Counts(ctx context.Context) (map[job.State]int, error)

	// Move changes the state of a job no agent holds (from must not be
	// in-progress, nor to: job.ErrIllegal), checked against the
	// legal-transitions map (job.ErrIllegal), for managerd's policy and
	// the operator's actions: job.ErrState when the job is not in from, ErrBusy when
	// someone else is changing it. mutate, when not nil, edits the new
	// lifecycle before it is written (a non-nil error aborts the
	// move). A control request travelling with the job wins over the
	// move, as in pkg/job.
	Move(ctx context.Context, id string, from, to job.State, actor, reason string, mutate func(*job.Job) error) (*job.Job, error)
	// RequestControl asks the holder of running job id to hold,
	// cancel or kill it (job.Control names the attempt). The holder,
	// or whoever finds the request next, applies it exactly once. A job
	// that is not running is job.ErrState (move it instead).
	RequestControl(ctx context.Context, id string, c job.Control) error
	// Retry takes a killed (or, with includeSucceeded, succeeded) job
	// back to queued with a fresh attempt count (job.ErrState for a
	// job in another state).
	Retry(ctx context.Context, id, actor string, includeSucceeded bool) (*job.Job, error)
	// Remove deletes a terminal job (job.ErrState otherwise).
	Remove(ctx context.Context, id, actor string) (*job.Job, error)
	// Expire is retention's Remove: only if the job is terminal
	// (job.ErrState otherwise) and finished before cutoff
	// (job.ErrNotExpired otherwise).
	Expire(ctx context.Context, id, actor string, cutoff time.Time) (*job.Job, error)

	// History returns job id's transitions, oldest first.
	History(ctx context.Context, id string) ([]job.Event, error)

	// Recover runs one recovery pass: every claim whose holder is gone
	// (dead, or silent for opts.SilentAfter; on a database, its lease
	// expired) is taken away — its job moved to stale, with a reason
	// saying why — and every half-done change is finished. A claim
	// whose holder is alive, within its lease and (with
	// opts.SilentAfter) heart-beating is never touched.
	Recover(ctx context.Context, opts RecoverOptions) ([]job.Outcome, error)

	// Close releases what the store holds (connections, watches).
	Close() error
}

// Claim is one attempt of a job, leased to one holder. Every write
// through it first proves the claim still holds its job (its fencing
// token is still the job's); a claim that lost its job gets an error for
// which Lost is true and changes nothing. Its methods are safe for
// concurrent use.
type Claim interface {
	// Job returns a copy of the job's lifecycle as the claim last
	// wrote it.
	Job() *job.Job
	// Prompt returns the job's prompt.
	Prompt() json.RawMessage
	// Token is the claim's fencing token (job.json's claim_token; an
	// exec handler's job.EnvClaimToken).
	Token() string
	// Dir is the attempt's working directory on this host: where the
	// handler runs and its output goes (in a spool, the job's own
	// directory).
	Dir() string
	// Heartbeat renews the claim (its lease, its last_heartbeat).
	Heartbeat(ctx context.Context) error
	// PendingControl returns the operator's request for this attempt,
	// or nil.
	PendingControl(ctx context.Context) (*job.Control, error)
	// RecordHandler records the process running the job's handler, so
	// that recovery on this host can make sure it is gone before the
	// job runs again.
	RecordHandler(ctx context.Context, id proc.Identity) error
	// Fence proves the claim still holds its job, for a side effect
	// the claim is about to make outside the store.
	Fence(ctx context.Context) error
	// Commit ends the attempt: to must be a legal target of
	// in-progress (job.ErrIllegal); mutate, when not nil, edits the
	// new lifecycle. A failed Commit (not Lost) may be called again
	// with the same arguments and finishes what the first began.
	Commit(ctx context.Context, to job.State, reason string, mutate func(*job.Job)) error
}

// ClaimOptions says what a Claim may take.
type ClaimOptions struct {
	// Max is how many jobs at most (at least 1 is taken as 1).
	Max int
	// Kinds, when not empty, are the only kinds claimed.
	Kinds []string
	// Lease is how long a claim holds without a heartbeat before
	// recovery may take it away (a database store's lease; a spool's
	// claim holds while its holder lives, and watchdogd's silence
	// threshold stands in for the lease).
	Lease time.Duration
	// PassedOver, when not nil, is told of a queued job the claim saw
	// and left because its kind is not in Kinds (a store that selects
	// by kind in its query never sees one, and never calls it).
	PassedOver func(kind, id string)
}

// Filter selects jobs for List. Its zero value selects every job.
type Filter struct {
	States []job.State // empty: every state
	Kinds  []string    // empty: every kind
	// FinishedBefore, when not zero, selects jobs that reached their
	// state before it (job.Job.Finished): retention's scan.
	FinishedBefore time.Time
	// DueBy, when not zero, selects jobs whose not_before is at or
	// before it (deferred jobs that are due).
	DueBy time.Time
	// ByFinished lists the jobs in the order they reached their state
	// (job.Job.Finished, oldest first; the same time in ID order)
	// instead of in ID order: retention's scan (with FinishedBefore),
	// which a database answers from an index on the finishing time of
	// terminal jobs, reading only the jobs that are due. AfterID is
	// refused with it (an error): retention removes what it lists, so
	// its next page starts at the oldest again, with the jobs it could
	// not remove first.
	ByFinished bool
	// AfterID, when not empty, starts the listing after that ID (a
	// page's cursor).
	AfterID string
	// Limit, when positive, stops after that many jobs.
	Limit int
}

// Check refuses what no store lists: AfterID with ByFinished (the
// finishing order has no ID cursor).
func (f Filter) Check() error {
	if f.ByFinished && f.AfterID != "" {
		return errors.New("list: ByFinished takes no AfterID (it lists from the job that finished first)")
	}
	return nil
}

// FinishedOrder is the order of a listing ByFinished: by job.Job.Finished,
// then by ID.
func FinishedOrder(a, b *job.Job) int {
	if c := a.Finished().Compare(b.Finished()); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// RecoverOptions says how Recover judges holders.
type RecoverOptions struct {
	Actor string // who recovers, for the events (e.g. watchdogd)
	// SilentAfter: a claim whose last heartbeat is older than
	// SilentAfter (plus Grace) is taken away, whatever else the store
	// knows of its holder (a spool: its process still alive; a
	// database: its lease still running). Every store honours it, and
	// the conformance suite relies on it to take a claim away from a
	// holder that stops heart-beating. Zero: only dead holders (or
	// expired leases).
	SilentAfter time.Duration
	// Grace is added to an expired lease before a claim of a silent
	// host is taken away (a database store: the host's own watchdogd
	// may still be stopping its handler).
	Grace time.Duration
}
