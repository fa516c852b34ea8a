package store

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/farro-dev/farro/pkg/job"
)

// Importer inserts jobs exactly as they were kept elsewhere (moving a
// queue from a spool to a database): with their state, attempts,
// timestamps and history, not as new submissions. Only a database store
// implements it.
type Importer interface {
	// Import inserts rec's job, its prompt and its events in one
	// transaction. A job already there with the same content is left
	// alone (ImportSame); one with the same ID and other content is an
	// error wrapping job.ErrDuplicate that says what differs (a
	// conflict: nothing is changed). An unknown state, or in-progress
	// (a claim cannot move between stores: import it as stale), is
	// refused, as is a record that would not pass a submit's checks.
	Import(ctx context.Context, rec ImportRecord) (ImportResult, error)
}

// ImportRecord is one job to import.
type ImportRecord struct {
	Job     *job.Job
	Prompt  json.RawMessage
	History []job.Event // oldest first
}

// ImportResult says what Import did.
type ImportResult int

const (
	// Imported: the job was inserted.
	Imported ImportResult = iota + 1
	// ImportSame: the job was there already, with the same content.
	ImportSame
)

// ErrImportRefused: Import refused the record itself (an unknown or
// in-progress state, an invalid ID, kind or prompt, another schema
// version); nothing was written.
var ErrImportRefused = errors.New("refused")
