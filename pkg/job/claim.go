package job

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// Holder is the identity under which an agent claims and commits jobs.
type Holder struct {
	Actor string // e.g. agentd/w1
	Agent string // agent id: names in-progress/<agent>/
}

// Claimed is a job held by this process: the envelope plus the lock. Its
// methods are safe for concurrent use (heartbeat and commit serialise).
type Claimed struct {
	mu     sync.Mutex
	spool  *Spool
	pool   *fsq.LockPool // the agent's: takes and recycles its lock
	holder Holder
	env    Envelope
	token  string // fencing token: in the lock's owner file and job.json
	// replaced is the outcome a commit already put into job.json, when
	// a later step of that commit failed (it is then rolled forward).
	replaced *Job
	done     bool
}

// Envelope returns a copy of the claimed job's envelope.
func (c *Claimed) Envelope() Envelope {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.env
	e.Lifecycle = c.env.Lifecycle.Clone()
	return e
}

// Claim is the load-job transaction: take incoming/<id>.lock (mkdir), write
// the owner file, verify job.json (queued, known schema), rename the job to
// in-progress/<agent>/<id>, then mark it in-progress with attempts+1, a new
// correlation id and a first heartbeat.
//
// Durability is group-committed: nothing is fsynced step by step. The new
// job.json is staged beside the old one, one barrier (a syncfs shared
// with every transaction waiting at that moment) makes all the steps so
// far durable, and only then does the staged file replace job.json, so a
// power cut never leaves it torn. Whatever subset of the steps a power cut
// keeps, recovery rolls the claim back (docs/RELIABILITY.md).
//
// Errors: fsq.ErrLocked (someone else has it), fsq.ErrVanished (gone),
// ErrControlled (an operator's pending request was applied instead),
// ErrSchema (lock released, job left in place), ErrState (status not
// queued; lock released), ErrCorrupt (quarantined to corrupt/).
func (s *Spool) Claim(id string, h Holder) (*Claimed, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	if err := ValidateID(h.Agent); err != nil {
		return nil, fmt.Errorf("agent id: %w", err)
	}
	// The fsq.CrashPoint calls mark the steps for the crash-simulation
	// harness (test/crash); they do nothing in release builds.
	lock := s.LockPath(id)
	fsq.CrashPoint("claim/lock:before")
	owner := NewOwner(h.Actor, h.Agent)
	pool := s.lockPool(h.Agent)
	if err := pool.TryLock(lock, owner.marshal()); err != nil {
		return nil, err
	}
	src := s.JobDir(Queued, "", id)
	j, err := ReadJob(src)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			if _, qerr := s.Quarantine(src, err.Error()); qerr != nil {
				err = fmt.Errorf("%w (quarantine failed: %v)", err, qerr)
			}
		}
		_ = pool.Unlock(lock)
		return nil, fmt.Errorf("claim %s: %w", id, err)
	}
	if j.Status != Queued {
		_ = pool.Unlock(lock)
		return nil, fmt.Errorf("claim %s: %w: status is %s in incoming/", id, ErrState, j.Status)
	}
	// An operator's request for the last attempt (it was released as the
	// request arrived) is applied instead of running the job again.
	to, reason, ctl, ok, ctlPresent := pendingControl(src, Queued, j)
	if ok && to != Queued {
		if err := dropControl(src); err == nil {
			_, err = s.apply(j, src, to, h.Actor, reason, func(nj *Job) error { ctl.Refund(nj); return nil })
		}
		_ = pool.Unlock(lock)
		if err != nil {
			return nil, fmt.Errorf("claim %s: applying an operator's request: %w", id, err)
		}
		return nil, fmt.Errorf("claim %s: %w: moved to %s (%s)", id, ErrControlled, to, reason)
	}
	prompt, err := ReadPrompt(src)
	if err != nil {
		_, qerr := s.Quarantine(src, err.Error())
		_ = pool.Unlock(lock)
		if !errors.Is(err, ErrCorrupt) {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return nil, fmt.Errorf("claim %s: %w (quarantine: %v)", id, err, qerr)
	}
	fsq.CrashPoint("claim/mkdir-agent:before")
	if err := fsq.MkdirDurable(s.AgentDir(h.Agent)); err != nil {
		_ = pool.Unlock(lock)
		return nil, fmt.Errorf("claim %s: %w", id, err)
	}
	dst := s.JobDir(InProgress, h.Agent, id)
	fsq.CrashPoint("claim/rename:before")
	if err := fsq.RenameUnsynced(src, dst); err != nil {
		_ = pool.Unlock(lock)
		return nil, fmt.Errorf("claim %s: %w", id, err)
	}
	// A control request that travelled here (it arrived while the last
	// attempt was released) is removed: Claim applied it above if it was
	// for that attempt. None for this attempt can exist yet:
	// RequestControl refuses a job whose status is not in-progress. The
	// barrier below makes the removal durable.
	if ctlPresent {
		if err := dropControl(dst); err != nil {
			_ = pool.Unlock(lock) // the job stays in-progress with status queued: recovery rolls it back
			return nil, fmt.Errorf("claim %s: %w", id, err)
		}
	}
	now := time.Now().UTC()
	nj := j.Clone()
	nj.Status, nj.Attempts, nj.Agent = InProgress, j.Attempts+1, h.Agent
	nj.CorrelationID = id + "/" + fmt.Sprint(nj.Attempts) + "-" + randHex(3)
	nj.ClaimToken = owner.Token
	nj.StartedAt, nj.LastHeartbeat, nj.UpdatedAt = &now, &now, now
	// job.json tells this attempt's outcome; earlier ones are in the
	// job's history (events.jsonl), their errors in the failed events.
	nj.FinishedAt, nj.ExitCode, nj.Reason, nj.Error, nj.NotBefore, nj.OutputDropped = nil, nil, "", "", nil, 0
	fsq.CrashPoint("claim/write:before")
	staged, err := s.sparePool(h.Agent).Stage(dst+"/"+JobFile, nj.Marshal())
	if err == nil {
		fsq.CrashPoint("claim/sync:before")
		if err = s.sync(); err == nil {
			fsq.CrashPoint("claim/replace:before")
			err = staged.Replace()
		}
		staged.Discard()
	}
	if err != nil {
		// Undo the move so the job is not stranded, but only while the
		// lock is still this claim's: a claim that stalled here past the
		// crash threshold may have been recovered, and the directory at
		// dst may be a newer claim's. If the undo fails, watchdogd rolls
		// the claim back (status is still queued).
		c := &Claimed{spool: s, pool: pool, holder: h, token: owner.Token, env: Envelope{Lifecycle: j, Runtime: Runtime{Dir: dst, Lock: lock}}}
		if ferr := c.holdsLock(); ferr != nil {
			return nil, fmt.Errorf("claim %s: %w (and %v)", id, err, ferr)
		}
		if rerr := fsq.Rename(dst, src); rerr == nil {
			_ = c.unlockIfHeld()
		}
		return nil, fmt.Errorf("claim %s: %w", id, err)
	}
	// The event follows the status it records (history never runs ahead
	// of job.json); the commit's first barrier makes it durable.
	fsq.CrashPoint("claim/append:before")
	_ = s.recordEvent(dst, nj, Event{Time: now, Actor: h.Actor, From: Queued, To: InProgress, Attempt: nj.Attempts, CorrelationID: nj.CorrelationID}, eventUnsynced)
	fsq.CrashPoint("claim/append:after")
	return &Claimed{spool: s, pool: pool, holder: h, token: owner.Token, env: Envelope{Prompt: prompt, Lifecycle: nj, Runtime: Runtime{Dir: dst, Lock: lock}}}, nil
}

// Heartbeat refreshes last_heartbeat in job.json. The file is fsynced but
// its directory is not: either version is a valid job.json after a power
// cut. It is fenced: it writes only after proving that the lock and
// job.json still carry this claim's token. ErrFenced or fsq.ErrVanished
// (test with Superseded) means the job was taken away (watchdogd declared
// this holder silent, and maybe a newer claim runs it): stop working on it.
func (c *Claimed) Heartbeat() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil
	}
	now := time.Now().UTC()
	j := c.env.Lifecycle.Clone()
	j.LastHeartbeat, j.UpdatedAt = &now, now
	if err := c.fence(); err != nil {
		return fmt.Errorf("heartbeat %s: %w", j.ID, err)
	}
	fsq.CrashPoint("heartbeat/write:before")
	if err := fsq.WriteFile(c.env.Runtime.Dir+"/"+JobFile, j.Marshal(), fsq.WithoutDirSync()); err != nil {
		return fmt.Errorf("heartbeat %s: %w", j.ID, err)
	}
	fsq.CrashPoint("heartbeat/write:after")
	c.env.Lifecycle = j
	return nil
}

// Commit is the commit-job transaction: check the transition against the
// map, write job.json with the new status (and whatever mutate sets),
// append the event, rename the job to its next state directory, and only
// then remove the lock. Every write is fenced: before job.json is replaced
// the lock and job.json must still carry this claim's token, and before
// the move and the unlock the lock must. ErrFenced or fsq.ErrVanished
// (test with Superseded) means the job was taken away meanwhile; nothing
// more is written and the lock is left alone, for it is no longer ours.
// Any other error leaves the claim uncommitted: Commit may be called again
// with the same arguments and rolls the commit forward from where it
// stopped.
//
// Durability is group-committed with two barriers (see Claim): one makes
// the staged job.json durable before it replaces the old one, the second
// makes the replaced job.json durable before the job moves. So once the
// job is seen in its new directory its new status is on disk: a power cut
// that loses the move is rolled forward by recovery, and an outcome once
// visible never comes back as a job to run again.
func (c *Claimed) Commit(to State, reason string, mutate func(*Job)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.env.Lifecycle
	if c.done {
		return fmt.Errorf("commit %s: already committed", cur.ID)
	}
	if !CanTransition(cur.Status, to) {
		return fmt.Errorf("commit %s: %w: %s -> %s", cur.ID, ErrIllegal, cur.Status, to)
	}
	now := time.Now().UTC()
	j := cur.Clone()
	j.Status, j.UpdatedAt, j.Reason = to, now, reason
	if to != Queued {
		j.FinishedAt = &now
	}
	if mutate != nil {
		mutate(j)
	}
	dir := c.env.Runtime.Dir
	q := string(to) // crash points are per target state
	if c.replaced != nil {
		// A previous call got past the replace: job.json already holds
		// the outcome. Finish the commit from there.
		return c.finishCommit(c.replaced, c.replaced.Status)
	}
	// Only abandoned temps (older than TempGrace) are dropped, so this
	// runs before the fence below: even a superseded claim removes
	// nothing another writer is using. The barriers make it durable.
	dropTemps(dir, TempGrace, false)
	fsq.CrashPoint("commit/write:before", q)
	staged, err := c.spool.sparePool(c.holder.Agent).Stage(dir+"/"+JobFile, j.Marshal())
	if err != nil {
		return fmt.Errorf("commit %s: %w", j.ID, err)
	}
	defer staged.Discard()
	fsq.CrashPoint("commit/sync:before", q)
	if err := c.spool.sync(); err != nil {
		return fmt.Errorf("commit %s: %w", j.ID, err)
	}
	// The fence, as close to the replace as it can be (a superseded
	// claim's staged file is discarded, never put in place).
	if err := c.fence(); err != nil {
		return fmt.Errorf("commit %s: %w", j.ID, err)
	}
	fsq.CrashPoint("commit/replace:before", q)
	if err := staged.Replace(); err != nil {
		return fmt.Errorf("commit %s: %w", j.ID, err)
	}
	c.replaced = j
	// The event follows the status it records: a commit killed before
	// this point is re-run without a terminal event left behind.
	fsq.CrashPoint("commit/append:before", q)
	_ = c.spool.recordEvent(dir, j, Event{Time: now, Actor: c.holder.Actor, From: cur.Status, To: to, Attempt: j.Attempts, Reason: reason, CorrelationID: j.CorrelationID}, eventUnsynced)
	return c.finishCommit(j, to)
}

// finishCommit is the part of a commit after job.json holds the outcome:
// barrier, move, unlock. It can be repeated after a failure (ENOSPC, EIO
// on the rename): each step is skipped once done.
func (c *Claimed) finishCommit(j *Job, to State) error {
	q := string(to)
	dir := c.env.Runtime.Dir
	fsq.CrashPoint("commit/sync2:before", q)
	if err := c.spool.sync(); err != nil {
		return fmt.Errorf("commit %s: %w", j.ID, err)
	}
	dst := c.spool.JobDir(to, "", j.ID)
	if err := c.holdsLock(); err != nil {
		return fmt.Errorf("commit %s: %w", j.ID, err)
	}
	fsq.CrashPoint("commit/rename:before", q)
	if err := fsq.RenameUnsynced(dir, dst); err != nil {
		return fmt.Errorf("commit %s: %w", j.ID, err)
	}
	c.done = true
	c.env.Lifecycle, c.env.Runtime.Dir = j, dst
	fsq.CrashPoint("commit/unlock:before", q)
	if err := c.unlockIfHeld(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("commit %s: %w", j.ID, err)
	}
	fsq.CrashPoint("commit/unlock:after", q)
	return nil
}
