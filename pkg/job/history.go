package job

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/farro-dev/farro/pkg/fsq"
)

// MaxEventsSize bounds a job's events.jsonl when it is read: a job's
// transitions are a few hundred bytes each.
const MaxEventsSize = 16 << 20

// ReadEvents reads the transitions recorded in the job directory dir's
// events.jsonl, oldest first (capped at MaxEventsSize, never blocking on
// what is planted there). Lines that cannot be parsed (a torn last line)
// are skipped and counted in bad.
func ReadEvents(dir string) (evs []Event, bad int, err error) {
	data, err := fsq.ReadFileCapped(filepath.Join(dir, EventsFile), MaxEventsSize)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", EventsFile, err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev Event
		if json.Unmarshal(line, &ev) != nil {
			bad++
			continue
		}
		evs = append(evs, ev)
	}
	return evs, bad, nil
}
