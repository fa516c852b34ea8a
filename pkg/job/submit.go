package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
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

// KindPattern is the pattern job kinds match, for messages.
const KindPattern = `^[a-z][a-z0-9._-]{0,63}$`

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }

func isKindByte(c byte) bool {
	return isLower(c) || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// ValidKind reports whether kind is a valid job kind (KindPattern).
func ValidKind(kind string) bool { return matchName(kind, 64, isLower, isKindByte) }

// Submit durably creates a job: it is built in tmp/, then renamed into
// incoming/ (or deferred/, held/) while holding the job's lock, after
// checking that the ID exists in no state. The returned job is acknowledged:
// it survives any crash from then on.
func (s *Spool) Submit(req SubmitRequest) (*Job, error) {
	jobs, errs := s.SubmitMany([]SubmitRequest{req})
	return jobs[0], errs[0]
}

// SubmitMany submits several jobs with the cost of one: each is built in
// tmp/ as Submit does, one barrier (fsq.Barrier) makes all of them
// durable, each is then renamed into its state's directory under its
// lock, and a second barrier makes the renames durable before any is
// acknowledged. jobs[i] and errs[i] are the outcome of reqs[i]; a failed
// request does not stop the others.
func (s *Spool) SubmitMany(reqs []SubmitRequest) (jobs []*Job, errs []error) {
	jobs, errs = make([]*Job, len(reqs)), make([]error, len(reqs))
	tmps := make([]string, len(reqs))
	defer func() {
		for i, tmp := range tmps {
			if tmp != "" && jobs[i] == nil {
				_ = os.RemoveAll(tmp)
			}
		}
	}()
	built := 0
	for i := range reqs {
		j, tmp, err := s.build(&reqs[i])
		tmps[i] = tmp
		if err != nil {
			errs[i] = err
			continue
		}
		jobs[i] = j
		built++
	}
	if built == 0 {
		return jobs, errs
	}
	// The fsq.CrashPoint calls mark the steps for the crash-simulation
	// harness (test/crash); they do nothing in release builds.
	fsq.CrashPoint("submit/sync-tmp:before")
	if err := s.sync(); err != nil {
		return failAll(jobs, errs, reqs, err)
	}
	for i := range reqs {
		if jobs[i] == nil {
			continue
		}
		if err := s.place(jobs[i], tmps[i], reqs[i].Actor); err != nil {
			jobs[i], errs[i] = nil, err
			continue
		}
		// The job's events.jsonl was built in tmp/; the stream's line
		// is made durable by the barrier below.
		j := jobs[i]
		_ = s.recordEvent("", j, submitEvent(j, reqs[i].Actor), eventWritten)
	}
	fsq.CrashPoint("submit/sync:before")
	if err := s.sync(); err != nil {
		// The jobs are in place but not known to be durable: report
		// them as failed; the caller may submit them again (a job that
		// did survive is then refused as a duplicate).
		return failAll(jobs, errs, reqs, err)
	}
	return jobs, errs
}

func failAll(jobs []*Job, errs []error, reqs []SubmitRequest, err error) ([]*Job, []error) {
	for i := range jobs {
		if jobs[i] != nil {
			jobs[i], errs[i] = nil, fmt.Errorf("submit %s: %w", reqs[i].ID, err)
		}
	}
	return jobs, errs
}

// build checks req, fills its defaults and writes the job's files into a
// new tmp/ directory (not fsynced: SubmitMany's first barrier does that).
func (s *Spool) build(req *SubmitRequest) (*Job, string, error) {
	if req.ID == "" {
		req.ID = NewID()
	}
	if err := ValidateID(req.ID); err != nil {
		return nil, "", err
	}
	if !ValidKind(req.Kind) {
		return nil, "", fmt.Errorf("invalid kind %q: must match %s", req.Kind, KindPattern)
	}
	if len(req.Prompt) > MaxPromptSize {
		return nil, "", fmt.Errorf("prompt is %d bytes, over the limit of %d", len(req.Prompt), MaxPromptSize)
	}
	if !json.Valid(req.Prompt) {
		return nil, "", errors.New("prompt is not valid JSON")
	}
	if req.MaxAttempts < 0 {
		return nil, "", errors.New("max attempts must not be negative")
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
	tmp := s.Path(TmpDir, req.ID+"."+randHex(4))
	fsq.CrashPoint("submit/mkdir-tmp:before")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, "", fmt.Errorf("submit %s: %w", req.ID, err)
	}
	ev, _ := json.Marshal(submitEvent(j, req.Actor))
	for _, f := range []struct {
		name string
		data []byte
	}{{PromptFile, req.Prompt}, {JobFile, j.Marshal()}, {EventsFile, append(ev, '\n')}} {
		fsq.CrashPoint("submit/create:before", f.name)
		if err := fsq.CreateFileUnsynced(tmp+"/"+f.name, f.data); err != nil {
			return nil, tmp, fmt.Errorf("submit %s: %w", req.ID, err)
		}
	}
	// Made durable by the same barrier as the job (see hint.go).
	if err := s.writeHint(j); err != nil {
		return nil, tmp, fmt.Errorf("submit %s: priority hint: %w", req.ID, err)
	}
	return j, tmp, nil
}

// place renames the built job from tmp into its state's directory while
// holding its lock, refusing an ID that exists in any state.
func (s *Spool) place(j *Job, tmp, actor string) error {
	lock := s.LockPath(j.ID)
	fsq.CrashPoint("submit/lock:before")
	if err := fsq.TryLock(lock, NewOwner(actor, "").marshal()); err != nil {
		if errors.Is(err, fsq.ErrLocked) {
			return fmt.Errorf("submit %s: %w (its lock is held)", j.ID, ErrDuplicate)
		}
		return fmt.Errorf("submit %s: %w", j.ID, err)
	}
	defer func() {
		fsq.CrashPoint("submit/unlock:before")
		_ = fsq.Unlock(lock)
		fsq.CrashPoint("submit/unlock:after")
	}()
	if locs, err := s.Locate(j.ID); err == nil {
		return fmt.Errorf("submit %s: %w (in %s)", j.ID, ErrDuplicate, locs[0].State)
	} else if !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("submit %s: %w", j.ID, err)
	}
	fsq.CrashPoint("submit/rename:before")
	if err := fsq.RenameUnsynced(tmp, s.JobDir(j.Status, "", j.ID)); err != nil {
		if errors.Is(err, fsq.ErrExists) {
			return fmt.Errorf("submit %s: %w", j.ID, ErrDuplicate)
		}
		return fmt.Errorf("submit %s: %w", j.ID, err)
	}
	return nil
}

// submitEvent is the first event of job j, submitted by actor.
func submitEvent(j *Job, actor string) Event {
	return Event{Time: j.CreatedAt, Actor: actor, To: j.Status, Reason: "submitted"}
}
