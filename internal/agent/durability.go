package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// durability is the agent's state after a failed sync of the spool's file
// system (fsq.ErrDurability). The spool's barrier fails every later sync
// (fsyncgate), so nothing this process writes can be acknowledged as
// durable any more: the agent stops claiming, stops its running jobs
// without waiting for the drain, and Run returns the error, so that agentd
// exits non-zero. Its supervisor restarts it, and recovery (watchdogd, at
// the new start) rolls every half-done transaction back or forward from
// what is really on disk.
type durability struct {
	once sync.Once
	stop context.CancelFunc // stops the claims; set by Run before the slots start
	lost chan struct{}      // closed once durability is lost
	mu   sync.Mutex
	err  error
}

// durabilityLost reports whether err is a lost-durability error; the first
// one is logged (once) and stops the claims.
func (a *Agent) durabilityLost(err error) bool {
	if !isDurability(err) {
		return false
	}
	a.durable.once.Do(func() {
		a.durable.mu.Lock()
		a.durable.err = err
		a.durable.mu.Unlock()
		a.log.Error().Err(err).Msg("durability lost: a sync of the spool failed; no longer claiming or committing, exiting so that recovery reads the truth from disk")
		close(a.durable.lost)
		if a.durable.stop != nil {
			a.durable.stop()
		}
	})
	return true
}

// durabilityErr is Run's error once durability is lost (nil before).
func (a *Agent) durabilityErr() error {
	a.durable.mu.Lock()
	defer a.durable.mu.Unlock()
	if a.durable.err == nil {
		return nil
	}
	return fmt.Errorf("agent %s stopped: %w", a.cfg.ID, a.durable.err)
}

func isDurability(err error) bool { return err != nil && errors.Is(err, fsq.ErrDurability) }

// badControl handles a control.json that job.ReadControl could not read,
// and returns whether it has been reported (warned carries that over from
// the previous poll). A hostile one (a symlink, FIFO, socket, directory or
// oversized file: fsq.IsHostile) can never become readable: it is moved out
// of the job directory into corrupt/ with a note (Spool.Quarantine) and
// logged once. Any other unreadable request (malformed JSON, unknown
// action) is logged once and ignored; a valid request written over it is
// honoured as usual.
func (a *Agent) badControl(dir string, err error, warned bool, l zerolog.Logger) bool {
	if fsq.IsHostile(err) && a.spool != nil {
		to, qerr := a.spool.Quarantine(filepath.Join(dir, job.ControlFile), err.Error())
		if qerr == nil {
			l.Error().Err(err).Str("quarantined_to", to).Msg("hostile control request moved to corrupt/")
			return false
		}
		if !warned {
			l.Error().Err(err).AnErr("quarantine_error", qerr).Msg("hostile control request ignored: cannot move it to corrupt/")
		}
		return true
	}
	if !warned {
		l.Warn().Err(err).Msg("unreadable control request ignored")
	}
	return true
}
