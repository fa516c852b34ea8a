// Package job is farro's job model: the envelope (immutable prompt,
// persisted lifecycle, in-memory runtime), the states and the
// legal-transitions map, and the transactions that move jobs through the
// spool (submit, claim, heartbeat, commit, operator moves, recovery).
//
// Every transaction is a sequence of durable pkg/fsq steps ordered so that
// a crash between any two of them leaves a state that recovery (Reconcile)
// rolls forward or back to one where the job exists exactly once.
package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// SchemaVersion is the job.json schema this build understands. A job with
// another version is never processed (seed 002 section 7.3).
const SchemaVersion = "1.0.0"

// File names inside a job directory.
const (
	PromptFile  = "prompt.json"  // immutable input, never rewritten
	JobFile     = "job.json"     // lifecycle, rewritten atomically
	EventsFile  = "events.jsonl" // append-only transition history
	ControlFile = "control.json" // operator request to a running job
	StdoutFile  = "stdout.log"   // output of jobs run before per-attempt files (see OutputFile)
	StderrFile  = "stderr.log"
	ResultFile  = "result.json"
)

// MaxPromptSize bounds prompt.json: submit refuses a bigger prompt and
// ReadPrompt refuses (ErrCorrupt) a bigger file found in the spool.
const MaxPromptSize = 1 << 20

// MaxJobFileSize bounds job.json when it is read: a real one is a few
// KiB; a bigger file is ErrCorrupt and is quarantined unread.
const MaxJobFileSize = 64 << 10

// MaxControlSize bounds control.json when it is read.
const MaxControlSize = 4 << 10

var (
	// ErrCorrupt: the job directory cannot be read as a job (missing or
	// malformed job.json, a symlink, a file where a directory must be).
	// Such jobs are quarantined to corrupt/.
	ErrCorrupt = errors.New("corrupt job")
	// ErrSchema: job.json has a schema_version this build does not
	// understand. The job is left where it is.
	ErrSchema = errors.New("unknown schema version")
	// ErrIllegal: the transition is not in the legal-transitions map.
	ErrIllegal = errors.New("illegal transition")
	// ErrState: the job is not in the state the caller expected.
	ErrState = errors.New("unexpected job state")
	// ErrDuplicate: a job with this ID exists already.
	ErrDuplicate = errors.New("job id exists")
	// ErrNotFound: no job with this ID.
	ErrNotFound = errors.New("job not found")
	// ErrControlled: a claim found an operator's request for the job's
	// last attempt and applied it (held or killed) instead of running it.
	ErrControlled = errors.New("operator's request applied")
)

// Job is the lifecycle part of the envelope: the content of job.json.
type Job struct {
	SchemaVersion string     `json:"schema_version"`
	ID            string     `json:"id"`
	Kind          string     `json:"kind"`
	Status        State      `json:"status"`
	Priority      int        `json:"priority"`
	Attempts      int        `json:"attempts"`
	MaxAttempts   int        `json:"max_attempts"` // 0: managerd's --max-attempts
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	NotBefore     *time.Time `json:"not_before,omitempty"`
	Agent         string     `json:"agent,omitempty"`
	CorrelationID string     `json:"correlation_id,omitempty"`
	ClaimToken    string     `json:"claim_token,omitempty"` // fencing token of the attempt's claim (also in the lock's owner file)
	StartedAt     *time.Time `json:"started_at,omitempty"`
	LastHeartbeat *time.Time `json:"last_heartbeat,omitempty"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
	ExitCode      *int       `json:"exit_code,omitempty"`
	Reason        string     `json:"reason,omitempty"` // why the job is in its state
	Error         string     `json:"error,omitempty"`  // last attempt's error
	// OutputDropped is how many bytes of the last attempt's output
	// agentd dropped past its --output-max (0: nothing dropped).
	OutputDropped int64 `json:"output_dropped,omitempty"`
}

// Runtime is the transient part of the envelope, never written to disk.
type Runtime struct {
	Dir  string // the job directory now
	Lock string // the claim lock held for it, if any
}

// Envelope is the in-memory job: immutable prompt, persisted lifecycle and
// transient runtime (seed 002 section 4).
type Envelope struct {
	Prompt    json.RawMessage
	Lifecycle *Job
	Runtime   Runtime
}

// Clone returns a deep-enough copy for mutation before a commit.
func (j *Job) Clone() *Job {
	c := *j
	return &c
}

// Marshal renders job.json.
func (j *Job) Marshal() []byte {
	b, _ := json.MarshalIndent(j, "", "  ")
	return append(b, '\n')
}

// ParseJob decodes and validates job.json. Malformed content yields
// ErrCorrupt; an unknown schema version yields ErrSchema (with the job
// still returned, so that callers can say which job it was).
func ParseJob(data []byte) (*Job, error) {
	var j Job
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%w: job.json: %v", ErrCorrupt, err)
	}
	if j.SchemaVersion == "" {
		return nil, fmt.Errorf("%w: job.json: no schema_version", ErrCorrupt)
	}
	if j.SchemaVersion != SchemaVersion {
		return &j, fmt.Errorf("%w: %q (this build understands %q)", ErrSchema, j.SchemaVersion, SchemaVersion)
	}
	if err := ValidateID(j.ID); err != nil {
		return nil, fmt.Errorf("%w: job.json: %v", ErrCorrupt, err)
	}
	if !j.Status.Valid() {
		return nil, fmt.Errorf("%w: job.json: unknown status %q", ErrCorrupt, j.Status)
	}
	if j.Kind == "" {
		return nil, fmt.Errorf("%w: job.json: no kind", ErrCorrupt)
	}
	if j.Attempts < 0 || j.MaxAttempts < 0 {
		return nil, fmt.Errorf("%w: job.json: negative attempts", ErrCorrupt)
	}
	return &j, nil
}

// DefaultMaxAttempts is managerd's --max-attempts when it is not set: the
// limit of a job whose max_attempts is 0 while no managerd says otherwise.
const DefaultMaxAttempts = 3

// EffectiveMaxAttempts is the job's own limit, or def when it has none.
func (j *Job) EffectiveMaxAttempts(def int) int {
	if j.MaxAttempts > 0 {
		return j.MaxAttempts
	}
	return def
}
