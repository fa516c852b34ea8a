package crawl

import (
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// CancelOutcome says what CancelJob did.
type CancelOutcome int

// Outcomes of CancelJob.
const (
	CancelDone      CancelOutcome = iota // moved to killed ("cancelled")
	CancelRequested                      // running: its agent was asked to stop
	CancelTerminal                       // already succeeded or killed
)

// CancelJob cancels job id wherever it is: a job nobody runs is moved to
// killed with reason "cancelled", a running one gets a control request.
// fsq.ErrLocked means busy (try again); job.ErrNotFound that it is gone.
func CancelJob(s *job.Spool, id, actor string) (CancelOutcome, error) {
	locs, err := s.Locate(id)
	if err != nil {
		return 0, err
	}
	var lastErr error
	for _, l := range locs {
		switch l.State {
		case job.Succeeded, job.Killed:
			return CancelTerminal, nil
		case job.InProgress:
			err := s.RequestControl(l.Agent, id, job.Control{Action: job.ControlCancel, Actor: actor, Reason: "crawl cancelled"})
			if err == nil {
				return CancelRequested, nil
			}
			lastErr = err
		default:
			if _, err := s.Move(id, l.State, job.Killed, actor, job.ReasonCancelled+": crawl cancelled", nil); err != nil {
				lastErr = err
				continue
			}
			return CancelDone, nil
		}
	}
	if lastErr == nil {
		lastErr = fsq.ErrLocked
	}
	return 0, lastErr
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
