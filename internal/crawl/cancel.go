package crawl

import (
	"context"
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

// CancelOutcome says what CancelJob did.
type CancelOutcome int

// Outcomes of CancelJob.
const (
	CancelDone      CancelOutcome = iota // moved to killed ("cancelled")
	CancelRequested                      // running: its agent was asked to stop
	CancelTerminal                       // already succeeded or killed
)

// CancelJob cancels job id wherever the job store keeps it: a job nobody
// runs is moved to killed with reason "cancelled", a running one gets a
// control request. store.ErrBusy means busy, job.ErrState that it moved
// meanwhile (try again); job.ErrNotFound that it is gone.
func CancelJob(ctx context.Context, s store.Store, id, actor string) (CancelOutcome, error) {
	j, err := s.Get(ctx, id)
	if err != nil {
		return 0, err
	}
	switch j.Status {
	case job.Succeeded, job.Killed:
		return CancelTerminal, nil
	case job.InProgress:
		if err := s.RequestControl(ctx, id, job.Control{Action: job.ControlCancel, Actor: actor, Reason: "crawl cancelled"}); err != nil {
			return 0, err
		}
		return CancelRequested, nil
	default:
		if _, err := s.Move(ctx, id, j.Status, job.Killed, actor, job.ReasonCancelled+": crawl cancelled", nil); err != nil {
			return 0, err
		}
		return CancelDone, nil
	}
}

// Request is an operator request to the frontier of a crawl, a file in
// crawls/<name>/requests/ that the frontier applies and removes.
type Request struct {
	Op          string    `json:"op"` // "reset", "refresh" or "retry"
	Domain      string    `json:"domain"`
	Actor       string    `json:"actor"`
	RequestedAt time.Time `json:"requested_at"`
	// Before (refresh): refresh the domain unless its current round
	// started at or after this time. Applying the same request twice
	// refreshes once, so a requester that crashed may simply ask again.
	Before *time.Time `json:"before,omitempty"`
	// States (retry): the last outcomes whose URLs are queued again.
	States []string `json:"states,omitempty"`
	// Reason (reset, recrawl): the operator's words, kept in the
	// domain's reason detail.
	Reason string `json:"reason,omitempty"`
	// Seeds (add_seeds): seeds added to crawl.json, to queue.
	Seeds []Seed `json:"seeds,omitempty"`
}

// Request ops.
const (
	OpReset   = "reset"
	OpRefresh = "refresh"
	// OpRecrawl: a new round of the domain in which every URL it knows is
	// fetched again (farroctl domain reset).
	OpRecrawl = "recrawl"
	// OpAddSeeds: queue seeds added to a crawl (farroctl crawl add-seeds).
	OpAddSeeds = "add_seeds"
)

// PutRequest writes an operator request for the frontier.
func (st *Store) PutRequest(r Request) (string, error) {
	if r.RequestedAt.IsZero() {
		r.RequestedAt = time.Now().UTC()
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	p := filepath.Join(st.Path(RequestsDir), r.RequestedAt.Format("20060102T150405.000000Z")+"-"+r.Op+"-"+randHex(3)+".json")
	if err := fsq.MkdirDurable(st.Path(RequestsDir)); err != nil {
		return "", err
	}
	return p, fsq.WriteFile(p, append(b, '\n'))
}
