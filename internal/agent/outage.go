package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ExitHandlerUnusable is the exit status of agentd when a configured
// handler cannot be used at start (a missing or non-executable --exec
// program): a configuration error that restarting cannot fix, so the
// systemd unit lists it in RestartPreventExitStatus=. 150 is
// registry.ExitAlreadyRunning.
const ExitHandlerUnusable = 151

// HandlerError is New's error for a handler whose Check fails.
type HandlerError struct {
	Kind string
	Err  error // wraps ErrHandlerUnusable
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("configuration error: the %s handler cannot be used: %v", e.Kind, e.Err)
}

func (e *HandlerError) Unwrap() error { return e.Err }

// ExitCode is the status a daemon exits with: ExitHandlerUnusable.
func (e *HandlerError) ExitCode() int { return ExitHandlerUnusable }

// Outage backoff defaults (Config.OutageBackoff, OutageBackoffMax).
const (
	defaultOutageBackoff    = 2 * time.Second
	defaultOutageBackoffMax = 30 * time.Second
)

// outages tracks the kinds whose handler could not start a job. While a
// kind is blocked, no claim asks for it (its jobs stay queued); a
// recheck after the backoff (the handler's Check, if it has one)
// unblocks it, and the next job of that kind is a trial: a start that
// fails again blocks it again for twice as long (up to the maximum), a
// start that succeeds ends the outage. Logged once at error level when
// an outage begins, once at warn level when it ends.
type outages struct {
	mu   sync.Mutex
	down map[string]*outage
	// bg is the lifetime of the recheck goroutines: cancelled, and
	// waited for, when Run returns.
	bg     context.Context
	stopBg context.CancelFunc
	wg     sync.WaitGroup
}

type outage struct {
	blocked bool
	delay   time.Duration
	since   time.Time
}

// runnable reports whether kind can run now: it has a handler, is not
// paused queue-wide (paused/) and is not blocked by an outage.
func (a *Agent) runnable(kind string) bool {
	if a.cfg.Handlers[kind] == nil || a.isPaused(kind) {
		return false
	}
	a.out.mu.Lock()
	defer a.out.mu.Unlock()
	o := a.out.down[kind]
	return o == nil || !o.blocked
}

// parked is the store's report of a job its claim passed over
// (store.ClaimOptions.PassedOver): logged once per kind when the kind has
// no handler at all (outages and pauses log themselves).
func (a *Agent) parked(kind, id string) {
	if a.cfg.Handlers[kind] != nil {
		return
	}
	if _, seen := a.noHandler.LoadOrStore(kind, true); seen {
		return
	}
	if a.notListed[kind] {
		a.log.Info().Str("kind", kind).Str("job_id", id).Strs("kinds", a.Kinds()).
			Msgf("kind %q is not in this agent's --kinds: its jobs are left queued for other agents; logged once", kind)
		return
	}
	hint := ""
	if kind == "exec" {
		hint = " (start agentd with --exec CMD or set FARRO_EXEC)"
	}
	a.log.Error().Str("kind", kind).Str("job_id", id).
		Msgf("no handler for kind %q on this agent%s: its jobs are left queued, not claimed; logged once", kind, hint)
}

// handlerOutcome updates kind's outage with the result of a job of that
// kind that began at began: err wrapping ErrHandlerUnusable blocks it,
// anything else ends an outage, unless the job began before the outage
// (a handler started before it vanished proves nothing about it now).
func (a *Agent) handlerOutcome(kind string, began time.Time, err error) {
	unusable := errors.Is(err, ErrHandlerUnusable)
	a.out.mu.Lock()
	o := a.out.down[kind]
	switch {
	case !unusable && (o == nil || began.Before(o.since)):
		a.out.mu.Unlock()
	case !unusable:
		delete(a.out.down, kind)
		a.out.mu.Unlock()
		a.log.Warn().Str("kind", kind).Dur("outage", time.Since(o.since).Round(time.Millisecond)).
			Msgf("the %s handler runs again: its jobs are claimed again", kind)
		if o.blocked {
			a.wakeClaims()
		}
	case o != nil && o.blocked:
		a.out.mu.Unlock() // another slot's failure of the same outage
	default:
		first := o == nil
		if first {
			o = &outage{delay: a.cfg.OutageBackoff, since: time.Now()}
			a.out.down[kind] = o
		} else {
			o.delay = min(2*o.delay, a.cfg.OutageBackoffMax) // the trial failed too
		}
		o.blocked = true
		delay := o.delay
		a.out.mu.Unlock()
		if first {
			a.log.Error().Err(err).Str("kind", kind).Dur("recheck_in", delay).
				Msgf("the %s handler cannot be started: its jobs are released back to queued without counting an attempt, and none is claimed until it is usable again", kind)
		}
		a.out.wg.Add(1)
		go a.recheck(kind, o, delay)
	}
}

// recheck waits delay, then checks kind's handler until it looks usable
// (doubling the wait each time), and unblocks the kind for a trial.
func (a *Agent) recheck(kind string, o *outage, delay time.Duration) {
	defer a.out.wg.Done()
	check := func() error { return nil }
	if c, ok := a.cfg.Handlers[kind].(Checker); ok {
		check = c.Check
	}
	for {
		t := time.NewTimer(delay)
		select {
		case <-a.out.bg.Done():
			t.Stop()
			return
		case <-t.C:
		}
		a.out.mu.Lock()
		if a.out.down[kind] != o || !o.blocked {
			a.out.mu.Unlock()
			return // ended meanwhile
		}
		a.out.mu.Unlock()
		err := check()
		a.out.mu.Lock()
		if a.out.down[kind] != o || !o.blocked {
			a.out.mu.Unlock()
			return
		}
		if err != nil {
			o.delay = min(2*o.delay, a.cfg.OutageBackoffMax)
			delay = o.delay
			a.out.mu.Unlock()
			a.log.Debug().Err(err).Str("kind", kind).Dur("recheck_in", delay).Msg("handler still unusable")
			continue
		}
		o.blocked = false
		a.out.mu.Unlock()
		a.log.Info().Str("kind", kind).Msgf("the %s handler looks usable again: trying the next job", kind)
		a.wakeClaims()
		return
	}
}
