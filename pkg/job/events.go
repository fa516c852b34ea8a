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

func appendEvent(dir string, ev Event) error {
	b, _ := json.Marshal(ev)
	return fsq.AppendLine(filepath.Join(dir, EventsFile), b)
}

// appendEventUnsynced appends ev for a transaction whose next barrier
// makes it durable.
func appendEventUnsynced(dir string, ev Event) error {
	b, _ := json.Marshal(ev)
	return fsq.AppendLineUnsynced(filepath.Join(dir, EventsFile), b)
}
