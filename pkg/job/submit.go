package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// SubmitRequest describes a new job.
type SubmitRequest struct {
	ID          string    // empty: a time-ordered ID is generated
	Kind        string    // handler kind, e.g. exec, noop
	Priority    int       // higher runs first
	MaxAttempts int       // 0: managerd's default
	NotBefore   time.Time // in the future: the job starts deferred
	Held        bool      // start held (paused)
	Prompt      []byte    // prompt.json content: a JSON document, at most MaxPromptSize
	Actor       string    // who submits, for the event log
}

var kindPattern = regexp.MustCompile(`^[a-z][a-z0-9._-]{0,63}$`)

// Submit durably creates a job: it is built in tmp/, then renamed into
// incoming/ (or deferred/, held/) while holding the job's lock, after
// checking that the ID exists in no state. The returned job is acknowledged:
// it survives any crash from then on.
func (s *Spool) Submit(req SubmitRequest) (*Job, error) {
	if req.ID == "" {
		req.ID = NewID()
	}
	if err := ValidateID(req.ID); err != nil {
		return nil, err
	}
	if !kindPattern.MatchString(req.Kind) {
		return nil, fmt.Errorf("invalid kind %q: must match %s", req.Kind, kindPattern)
	}
	if len(req.Prompt) > MaxPromptSize {
		return nil, fmt.Errorf("prompt is %d bytes, over the limit of %d", len(req.Prompt), MaxPromptSize)
	}
	if !json.Valid(req.Prompt) {
		return nil, errors.New("prompt is not valid JSON")
	}
	if req.MaxAttempts < 0 {
		return nil, errors.New("max attempts must not be negative")
	}
	if req.Actor == "" {
		req.Actor = "farroctl"
	}
	now := time.Now().UTC()
	j := &Job{
		SchemaVersion: SchemaVersion, ID: req.ID, Kind: req.Kind, Status: Queued,
		Priority: req.Priority, MaxAttempts: req.MaxAttempts, CreatedAt: now, UpdatedAt: now,
	}
	switch {
	case req.Held:
		j.Status, j.Reason = Held, "submitted held"
	case req.NotBefore.After(now):
		nb := req.NotBefore.UTC()
		j.Status, j.NotBefore, j.Reason = Deferred, &nb, "scheduled"
	}

	// The fsq.CrashPoint calls mark the steps for the crash-simulation
	// harness (test/crash); they do nothing in release builds.
	tmp := s.Path(TmpDir, req.ID+"."+randHex(4))
	fsq.CrashPoint("submit/mkdir-tmp:before")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("submit %s: %w", req.ID, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = os.RemoveAll(tmp)
		}
	}()
	ev, _ := json.Marshal(Event{Time: now, Actor: req.Actor, To: j.Status, Reason: "submitted"})
	for _, f := range []struct {
		name string
		data []byte
	}{{PromptFile, req.Prompt}, {JobFile, j.Marshal()}, {EventsFile, append(ev, '\n')}} {
		fsq.CrashPoint("submit/create:before", f.name)
		if err := fsq.CreateFile(tmp+"/"+f.name, f.data); err != nil {
			return nil, fmt.Errorf("submit %s: %w", req.ID, err)
		}
	}
	fsq.CrashPoint("submit/sync-tmp:before")
	if err := fsq.SyncDir(tmp); err != nil {
		return nil, fmt.Errorf("submit %s: %w", req.ID, err)
	}

	lock := s.LockPath(req.ID)
	fsq.CrashPoint("submit/lock:before")
	if err := fsq.TryLock(lock, NewOwner(req.Actor, "").marshal()); err != nil {
		if errors.Is(err, fsq.ErrLocked) {
			return nil, fmt.Errorf("submit %s: %w (its lock is held)", req.ID, ErrDuplicate)
		}
		return nil, fmt.Errorf("submit %s: %w", req.ID, err)
	}
	defer func() {
		fsq.CrashPoint("submit/unlock:before")
		_ = fsq.Unlock(lock)
		fsq.CrashPoint("submit/unlock:after")
	}()
	if locs, err := s.Locate(req.ID); err == nil {
		return nil, fmt.Errorf("submit %s: %w (in %s)", req.ID, ErrDuplicate, locs[0].State)
	} else if !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("submit %s: %w", req.ID, err)
	}
	fsq.CrashPoint("submit/rename:before")
	if err := fsq.Rename(tmp, s.JobDir(j.Status, "", req.ID)); err != nil {
		if errors.Is(err, fsq.ErrExists) {
			return nil, fmt.Errorf("submit %s: %w", req.ID, ErrDuplicate)
		}
		return nil, fmt.Errorf("submit %s: %w", req.ID, err)
	}
	committed = true
	return j, nil
}
