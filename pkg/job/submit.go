package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"

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
	// Each build holds a descriptor (its flock, see buildlock.go) until
	// its run ends: a huge batch goes in runs, two barriers each, so that
	// it cannot run out of descriptors.
	for lo := 0; lo < len(reqs); lo += maxBuildsPerRun {
		hi := min(lo+maxBuildsPerRun, len(reqs))
		s.submitRun(reqs[lo:hi], jobs[lo:hi], errs[lo:hi])
	}
	return jobs, errs
}

// maxBuildsPerRun bounds the builds, so the descriptors, that one run of
// SubmitMany holds at once (farroctl submit --batch sends 256).
const maxBuildsPerRun = 1024

// submitRun is SubmitMany for at most maxBuildsPerRun requests: it fills
// jobs and errs, which are as long as reqs.
func (s *Spool) submitRun(reqs []SubmitRequest, jobs []*Job, errs []error) {
	tmps := make([]string, len(reqs))
	locks := make([]int, len(reqs))
	defer func() {
		for i, tmp := range tmps {
			if tmp != "" && jobs[i] == nil {
				_ = os.RemoveAll(tmp)
			}
			if locks[i] >= 0 {
				unix.Close(locks[i]) // after the rename or the removal
			}
		}
	}()
	built := 0
	for i := range reqs {
		j, tmp, lock, err := s.build(&reqs[i])
		tmps[i], locks[i] = tmp, lock
		if err != nil {
			errs[i] = err
			continue
		}
		jobs[i] = j
		built++
	}
	if built == 0 {
		return
	}
	// The fsq.CrashPoint calls mark the steps for the crash-simulation
	// harness (test/crash); they do nothing in release builds.
	fsq.CrashPoint("submit/sync-tmp:before")
	if err := s.sync(); err != nil {
		failAll(jobs, errs, reqs, err)
		return
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
		failAll(jobs, errs, reqs, err)
	}
}

func failAll(jobs []*Job, errs []error, reqs []SubmitRequest, err error) {
	for i := range jobs {
		if jobs[i] != nil {
			jobs[i], errs[i] = nil, fmt.Errorf("submit %s: %w", reqs[i].ID, err)
		}
	}
}

// build checks req, fills its defaults and writes the job's files into a
// new tmp/ directory (not fsynced: SubmitMany's first barrier does that).
// It returns the directory and the descriptor holding its flock (-1:
// none), which the caller closes once the build is renamed or removed.
func (s *Spool) build(req *SubmitRequest) (*Job, string, int, error) {
	if req.ID == "" {
		req.ID = NewID()
	}
	if err := ValidateID(req.ID); err != nil {
		return nil, "", -1, err
	}
	if !ValidKind(req.Kind) {
		return nil, "", -1, fmt.Errorf("invalid kind %q: must match %s", req.Kind, KindPattern)
	}
	if len(req.Prompt) > MaxPromptSize {
		return nil, "", -1, fmt.Errorf("prompt is %d bytes, over the limit of %d", len(req.Prompt), MaxPromptSize)
	}
	if !json.Valid(req.Prompt) {
		return nil, "", -1, errors.New("prompt is not valid JSON")
	}
	if req.MaxAttempts < 0 {
		return nil, "", -1, errors.New("max attempts must not be negative")
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
	ev, _ := json.Marshal(submitEvent(j, req.Actor))
	files := [...]buildFile{{PromptFile, req.Prompt}, {JobFile, j.Marshal()}, {EventsFile, append(ev, '\n')}}
	var tmp string
	var lock int
	var err error
	for try := 1; ; try++ {
		tmp, lock, err = s.makeBuild(req.ID, files[:])
		if !errors.Is(err, errSwept) || try == maxBuildTries {
			break
		}
	}
	if err != nil {
		return nil, tmp, lock, fmt.Errorf("submit %s: %w", req.ID, err)
	}
	// Made durable by the same barrier as the job (see hint.go).
	if err := s.writeHint(j); err != nil {
		return nil, tmp, lock, fmt.Errorf("submit %s: priority hint: %w", req.ID, err)
	}
	return j, tmp, lock, nil
}

// buildFile is one file of a build directory.
type buildFile struct {
	name string
	data []byte
}

// maxBuildTries bounds the builds of one job that a sweep may remove
// before they are locked (errSwept): each needs the submitter to stall
// for longer than the sweep's age between a mkdir and the next syscall.
const maxBuildTries = 3

// makeBuild makes a new build directory for job id in tmp/, takes its
// flock and writes files into it. It returns the directory (empty once
// removed) and the flock's descriptor (-1: none). errSwept: the directory
// was removed before the flock was taken; a new one may be tried.
func (s *Spool) makeBuild(id string, files []buildFile) (string, int, error) {
	tmp := s.Path(TmpDir, id+"."+randHex(4))
	fsq.CrashPoint("submit/mkdir-tmp:before")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", -1, err
	}
	lock, err := lockBuild(tmp)
	if err != nil {
		_ = os.Remove(tmp) // still empty; gone already if a sweep took it
		return "", -1, err
	}
	for _, f := range files {
		fsq.CrashPoint("submit/create:before", f.name)
		if err := fsq.CreateFileUnsynced(tmp+"/"+f.name, f.data); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				// Only a sweep that held the flock before lockBuild took
				// it removes a build: this one is gone, not half-written.
				unix.Close(lock)
				return "", -1, fmt.Errorf("%w (%w)", errSwept, err)
			}
			return tmp, lock, err
		}
	}
	return tmp, lock, nil
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
