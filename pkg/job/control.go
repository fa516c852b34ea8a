package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// Control actions: what an operator asks of a running job through
// in-progress/<agent>/<id>/control.json.
const (
	ControlHold   = "hold"   // stop the handler, commit held
	ControlCancel = "cancel" // stop the handler, commit killed, reason "cancelled"
	ControlKill   = "kill"   // stop the handler, commit killed, reason "killed by operator"
)

// Reasons written into job.json by operator actions, whether the job was
// moved directly (not running) or by its agent honouring a control file.
const (
	ReasonHeld      = "held by operator"
	ReasonCancelled = "cancelled"
	ReasonKilled    = "killed by operator"
)

// Control is the content of control.json: an operator's request to the
// agent running a job. Operators never write a running job's job.json;
// they write this file (atomically) and the agent, which polls for it,
// stops the handler, removes the file and commits the state the action
// names.
//
// A request can reach a job that is just finishing, and then travels with
// it out of in-progress/. It names the attempt it was made for (its claim
// token), and is applied exactly once by whoever finds it next: the agent
// (before it commits), Move (managerd's retries, an operator's action) or
// Claim (a released job). A request for another attempt is discarded.
type Control struct {
	Action string `json:"action"` // ControlHold, ControlCancel or ControlKill
	Actor  string `json:"actor"`  // who asked, e.g. farroctl
	Reason string `json:"reason"` // optional operator note, appended to the reason
	// RequestedAt is when the operator asked.
	RequestedAt time.Time `json:"requested_at"`
	// ClaimToken and Attempt name the attempt the request was made for
	// (job.json's claim_token and attempts when it was written).
	// Whoever finds the request applies it if job.json still carries
	// that token (the attempt may have finished, been recovered or
	// released meanwhile: the request still holds), and discards it
	// otherwise.
	ClaimToken string `json:"claim_token,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
}

// For reports whether the request was made for j's current or last
// attempt. A request without a token (written by an older farro) counts
// when it was made after that attempt started.
func (c Control) For(j *Job) bool {
	if c.ClaimToken != "" {
		return c.ClaimToken == j.ClaimToken
	}
	return j.StartedAt != nil && !c.RequestedAt.Before(*j.StartedAt)
}

// Target is the state and reason the agent commits when it honours c:
// held ("held by operator") for hold, killed ("cancelled" or "killed by
// operator") for cancel and kill, with the operator's note appended as
// ": note" when there is one. ok is false for an unknown action.
func (c Control) Target() (to State, reason string, ok bool) {
	switch c.Action {
	case ControlHold:
		to, reason = Held, ReasonHeld
	case ControlCancel:
		to, reason = Killed, ReasonCancelled
	case ControlKill:
		to, reason = Killed, ReasonKilled
	default:
		return "", "", false
	}
	if c.Reason != "" {
		reason += ": " + c.Reason
	}
	return to, reason, true
}

// Refund takes back the attempt a hold request was made for, when j
// still counts it: an operator's hold, like a drain release, costs no
// attempt. The rule: the attempt that was running when the operator asked
// to hold is not held against the job, whatever became of it (stopped by
// the hold, failed or crashed as the request arrived); only an attempt
// that succeeded first keeps its outcome, and cancel and kill, which are
// terminal, keep their count. It is applied wherever the hold is: by the
// agent's commit, by Move (the request's target wins) and by Claim
// (ErrControlled). The attempt is refunded only while j.Attempts is still
// the request's Attempt, so an attempt already given back (a drain
// release) is not given back twice. A request without an Attempt (an
// older farro's) is taken to be for j's current attempt.
func (c Control) Refund(j *Job) {
	if c.Action != ControlHold || j.Attempts <= 0 {
		return
	}
	if c.Attempt == 0 || c.Attempt == j.Attempts {
		j.Attempts--
	}
}

// RequestControl asks the agent running job id to hold, cancel or kill it
// by atomically writing in-progress/<agent>/<id>/control.json. It takes no
// lock: the agent holds it and is the only one to act on the job. A job
// that is no longer running under agent yields fsq.ErrVanished (the caller
// locates it again). An empty Actor becomes "farroctl" and a zero
// RequestedAt now.
func (s *Spool) RequestControl(agent, id string, c Control) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if err := ValidateID(agent); err != nil {
		return fmt.Errorf("agent id: %w", err)
	}
	if _, _, ok := c.Target(); !ok {
		return fmt.Errorf("control %s: unknown action %q", id, c.Action)
	}
	if c.Actor == "" {
		c.Actor = "farroctl"
	}
	if c.RequestedAt.IsZero() {
		c.RequestedAt = time.Now().UTC()
	}
	dir := s.JobDir(InProgress, agent, id)
	j, err := ReadJob(dir)
	if err != nil {
		return fmt.Errorf("control %s: %w", id, err)
	}
	if j.Status != InProgress {
		// Its agent is committing it: the request would come too late
		// and travel with the job. Let the caller locate it again.
		return fmt.Errorf("control %s: job is finishing (status %s): %w", id, j.Status, fsq.ErrVanished)
	}
	c.ClaimToken, c.Attempt = j.ClaimToken, j.Attempts
	b, _ := json.MarshalIndent(c, "", "  ")
	fsq.CrashPoint("control/write:before", c.Action) // for test/crash; no-op in release builds
	if err := fsq.WriteFile(filepath.Join(dir, ControlFile), append(b, '\n')); err != nil {
		return fmt.Errorf("control %s: %w", id, err)
	}
	fsq.CrashPoint("control/write:after", c.Action)
	return nil
}

// ReadControl reads dir/control.json, capped at MaxControlSize. It returns
// (nil, nil) when there is none, and an error for a malformed file or an
// unknown action. A control.json that is a symlink, not a regular file
// (FIFO, socket, directory) or over the cap yields an error for which
// fsq.IsHostile is true: the caller moves it out of the way
// (Spool.Quarantine), for it will never become readable. The read never
// blocks.
func ReadControl(dir string) (*Control, error) {
	b, err := fsq.ReadFileCapped(filepath.Join(dir, ControlFile), MaxControlSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("control: %w", err)
	}
	var c Control
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("control: %s: %w", filepath.Join(dir, ControlFile), err)
	}
	if _, _, ok := c.Target(); !ok {
		return nil, fmt.Errorf("control: %s: unknown action %q", filepath.Join(dir, ControlFile), c.Action)
	}
	return &c, nil
}

// pendingControl reads the control request in the job directory dir and
// says what it asks of j: the target state and reason when it was made
// for j's attempt and that state is reachable from from; ok false
// otherwise (no request, another attempt's, or nothing legal to do).
// present says whether anything is there at all (a request, or an
// unreadable entry), so that callers remove only what exists. The caller
// holds the job's lock.
func pendingControl(dir string, from State, j *Job) (to State, reason string, c *Control, ok, present bool) {
	c, err := ReadControl(dir)
	present = c != nil || err != nil
	if err != nil || c == nil || !c.For(j) {
		return "", "", c, false, present
	}
	to, reason, _ = c.Target()
	if from != to && !CanTransition(from, to) {
		return "", "", c, false, present
	}
	return to, reason, c, true, present
}

// dropControl removes the control request of the job directory dir (made
// durable by the caller's next fsync of dir).
func dropControl(dir string) error {
	if err := os.Remove(filepath.Join(dir, ControlFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove control request: %w", err)
	}
	return nil
}
