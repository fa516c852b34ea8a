package job

import (
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// Event is one line of a job's events.jsonl: a transition, who made it,
// when and why.
type Event struct {
	Time          time.Time `json:"time"`
	Actor         string    `json:"actor"`
	From          State     `json:"from,omitempty"`
	To            State     `json:"to"`
	Attempt       int       `json:"attempt"`
	Reason        string    `json:"reason,omitempty"`
	CorrelationID string    `json:"correlation_id,omitempty"`
}

// How recordEvent writes the job's own events.jsonl.
type eventWrite int

const (
	eventSynced   eventWrite = iota // appended and fsynced
	eventUnsynced                   // appended; the transaction's next barrier makes it durable
	eventWritten                    // already in the job's directory (Submit built it in tmp/)
)

// recordEvent is the one place a transition of job j is recorded: the
// line of the job's events.jsonl in dir (the authority), then the line
// of the spool-wide stream (events/, never fsynced: a barrier the
// transaction waits for, or the kernel's writeback, makes it durable).
// Only the first's error is returned: a stream failure is counted
// (StreamFailures) and never fails nor blocks the transition.
func (s *Spool) recordEvent(dir string, j *Job, ev Event, how eventWrite) error {
	var err error
	switch how {
	case eventSynced, eventUnsynced:
		b, _ := json.Marshal(ev)
		if how == eventSynced {
			err = fsq.AppendLine(filepath.Join(dir, EventsFile), b)
		} else {
			err = fsq.AppendLineUnsynced(filepath.Join(dir, EventsFile), b)
		}
	}
	s.streamTransition(j, ev)
	return err
}
