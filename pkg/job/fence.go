package job

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/farro-dev/farro/pkg/fsq"
)

// ErrFenced means a claim is no longer the current one: its lock is gone
// or now names another claim's token, or job.json carries another claim's
// token. The holder of a fenced claim writes nothing more for it: it stops
// its handler and forgets the job (recovery, or the newer claim, owns it).
var ErrFenced = errors.New("claim superseded (fenced)")

// EnvClaimToken is the environment variable through which an exec handler
// gets its claim's fencing token, so that it can fence its own side
// effects (compare it with job.json's claim_token, or pass it to a store
// that keeps the highest token it has seen).
const EnvClaimToken = "FARRO_CLAIM_TOKEN"

// Token is the claim's fencing token: unique per claim, written into the
// lock's owner file and job.json's claim_token.
func (c *Claimed) Token() string { return c.token }

// holdsLock proves that the lock still names this claim: its owner file
// is readable and carries the claim's token. The caller holds c.mu.
func (c *Claimed) holdsLock() error {
	id := c.env.Lifecycle.ID
	raw, err := fsq.ReadOwner(c.env.Runtime.Lock)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: lock gone: %w", id, ErrFenced)
		}
		// Nothing is proven: write nothing, but let the caller retry.
		return fmt.Errorf("%s: cannot read the lock's owner: %w", id, err)
	}
	o, err := ParseOwner(raw)
	if err != nil || o.Token != c.token {
		return fmt.Errorf("%s: lock now held by another claim: %w", id, ErrFenced)
	}
	return nil
}

// fence proves that this claim is still current before it writes: the
// lock names its token, and the job.json it is about to replace carries
// it too, with status in-progress. A vanished job directory is
// fsq.ErrVanished (recovery took the job away). The caller holds c.mu.
func (c *Claimed) fence() error {
	if err := c.holdsLock(); err != nil {
		return err
	}
	j, err := ReadJob(c.env.Runtime.Dir)
	if err != nil {
		return err
	}
	if j.ClaimToken != c.token || j.Status != InProgress {
		return fmt.Errorf("%s: job.json belongs to claim %q (status %s): %w", j.ID, j.ClaimToken, j.Status, ErrFenced)
	}
	return nil
}

// unlockIfHeld removes the claim's lock only if it still names this
// claim; a lock that changed hands is left alone (ErrFenced).
func (c *Claimed) unlockIfHeld() error {
	if err := c.holdsLock(); err != nil {
		return err
	}
	if c.pool == nil {
		return fsq.Unlock(c.env.Runtime.Lock)
	}
	return c.pool.Unlock(c.env.Runtime.Lock)
}

// Superseded reports whether err says that a claim was fenced off or its
// job taken away: the holder must stop and write nothing more.
func Superseded(err error) bool {
	return errors.Is(err, ErrFenced) || errors.Is(err, fsq.ErrVanished)
}

// PendingControl returns the operator's request (control.json) made for
// this claim, or nil. A request for another claim is not this one's.
func (c *Claimed) PendingControl() (*Control, error) {
	c.mu.Lock()
	dir, j := c.env.Runtime.Dir, c.env.Lifecycle
	c.mu.Unlock()
	ctl, err := ReadControl(dir)
	if err != nil || ctl == nil {
		return nil, err
	}
	if ctl.ClaimToken != "" && ctl.ClaimToken != c.token {
		return nil, nil
	}
	if ctl.ClaimToken == "" && !ctl.For(j) {
		return nil, nil
	}
	return ctl, nil
}

// DropControl removes the control request that this claim is honouring
// (the commit that follows applies it). It is fenced like every write of
// a claim.
func (c *Claimed) DropControl() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fence(); err != nil {
		return err
	}
	return dropControl(c.env.Runtime.Dir)
}

// Fence proves that this claim is still the job's current one (its lock
// and job.json carry its token), for a handler about to put its output in
// place: a handler of a superseded claim must write nothing into the job
// directory, which may by now be a newer claim's. Test with Superseded.
func (c *Claimed) Fence() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return fmt.Errorf("%s: already committed: %w", c.env.Lifecycle.ID, ErrFenced)
	}
	return c.fence()
}
