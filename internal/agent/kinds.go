package agent

// Dedicated agents and paused kinds. Config.Kinds (agentd --kinds) limits
// the kinds an agent claims to a list; a kind of the list without a
// handler is a configuration error at start. The queue-wide pause of a
// kind (internal/pause, paused/<kind>) is read from paused/'s entries on
// every inotify event there and at least every PauseRescan; a claim only
// reads the cached set. A paused kind is left out of the kinds a claim
// asks for, like a kind in an outage: the store's index parks its jobs
// and gives them back once a claim asks for it again.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/pause"
	"github.com/farro-dev/farro/pkg/fsq"
)

// ExitConfig is agentd's exit status for a configuration error found by
// New (a --kinds naming a kind the agent has no handler for, an invalid
// kind name): the daemons' configuration-error status, daemon.ExitConfig,
// which the units list in RestartPreventExitStatus (cmd/agentd's tests
// check the two agree).
const ExitConfig = 152

// ConfigError is New's error for a configuration it refuses.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return "configuration error: " + e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ExitCode is the status a daemon exits with: ExitConfig.
func (e *ConfigError) ExitCode() int { return ExitConfig }

// KindAliases are the short names --kinds accepts for several kinds.
var KindAliases = map[string][]string{
	"crawl": {"crawl.fetch", "crawl.robots"},
}

// defaultPauseRescan is how often, at most, paused/ is listed again
// without an inotify event (Config.PauseRescan).
const defaultPauseRescan = 500 * time.Millisecond

// ParseKinds parses agentd's --kinds: kinds separated by commas (spaces
// around them ignored), aliases (KindAliases) expanded, repeats dropped.
// An empty list, an empty element or an invalid kind name is an error
// (*ConfigError).
func ParseKinds(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k := strings.TrimSpace(part)
		if k == "" {
			return nil, &ConfigError{fmt.Errorf("--kinds %q: an empty kind (kinds are separated by single commas)", s)}
		}
		ks := KindAliases[k]
		if ks == nil {
			if err := pause.ValidateKind(k); err != nil {
				return nil, &ConfigError{fmt.Errorf("--kinds: %w", err)}
			}
			ks = []string{k}
		}
		for _, k := range ks {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out, nil
}

// selectKinds keeps, of cfg.Handlers, only the kinds of cfg.Kinds (all
// when Kinds is nil), and returns the kinds it dropped. A kind of Kinds
// without a handler is a *ConfigError.
func selectKinds(cfg *Config) (dropped map[string]bool, err error) {
	if cfg.Kinds == nil {
		return nil, nil
	}
	if len(cfg.Kinds) == 0 {
		return nil, &ConfigError{fmt.Errorf("--kinds is empty: name at least one kind")}
	}
	have := make([]string, 0, len(cfg.Handlers))
	for k := range cfg.Handlers {
		have = append(have, k)
	}
	sort.Strings(have)
	keep := make(map[string]Handler, len(cfg.Kinds))
	for _, k := range cfg.Kinds {
		if err := pause.ValidateKind(k); err != nil {
			return nil, &ConfigError{fmt.Errorf("--kinds: %w", err)}
		}
		h := cfg.Handlers[k]
		if h == nil {
			hint := ""
			if k == "exec" {
				hint = "; start agentd with --exec CMD or set FARRO_EXEC"
			}
			return nil, &ConfigError{fmt.Errorf("--kinds names %q, which this agent has no handler for (it has %s%s)", k, strings.Join(have, ", "), hint)}
		}
		keep[k] = h
	}
	dropped = map[string]bool{}
	for k := range cfg.Handlers {
		if keep[k] == nil {
			dropped[k] = true
		}
	}
	cfg.Handlers = keep
	return dropped, nil
}

// Kinds is the sorted list of the kinds this agent claims.
func (a *Agent) Kinds() []string {
	out := make([]string, 0, len(a.cfg.Handlers))
	for k := range a.cfg.Handlers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// isPaused reports whether kind is paused queue-wide (the cached set).
func (a *Agent) isPaused(kind string) bool {
	m := a.paused.Load()
	return m != nil && (*m)[kind]
}

// refreshPauses lists paused/ and updates the cached set: kinds paused
// meanwhile are parked at their next turn (runnable says no), kinds
// resumed get their parked jobs back. A paused/ that cannot be listed
// keeps the set as it was (logged once until it can be listed again).
func (a *Agent) refreshPauses() {
	kinds, ignored, err := pause.Kinds(a.spool.Root)
	if err != nil {
		if !a.pauseErr {
			a.pauseErr = true
			a.log.Error().Err(err).Msg("cannot list paused/: the kinds paused before stay paused, no other is paused until it can be listed; logged once")
		}
		return
	}
	if a.pauseErr {
		a.pauseErr = false
		a.log.Info().Msg("paused/ can be listed again")
	}
	for name, why := range ignored {
		if !a.pauseIgnored[name] {
			a.log.Warn().Str("entry", name).Str("problem", why).
				Msg("an entry of paused/ pauses nothing: only a regular file named by a kind does (farroctl pause KIND); logged once")
		}
	}
	a.pauseIgnored = ignoredSet(ignored)
	next := make(map[string]bool, len(kinds))
	for _, k := range kinds {
		next[k] = true
	}
	prev := a.paused.Load()
	a.paused.Store(&next)
	for k := range next {
		if (prev == nil || !(*prev)[k]) && a.cfg.Handlers[k] != nil {
			a.log.Info().Str("kind", k).Msgf("kind %s paused queue-wide: its queued jobs are left queued, running ones finish", k)
		}
	}
	if prev == nil {
		return
	}
	for k := range *prev {
		if !next[k] && a.cfg.Handlers[k] != nil {
			a.log.Info().Str("kind", k).Msgf("kind %s resumed: its jobs are claimed again", k)
			a.wakeClaims()
		}
	}
}

func ignoredSet(m map[string]string) map[string]bool {
	s := make(map[string]bool, len(m))
	for k := range m {
		s[k] = true
	}
	return s
}

// watchPauses makes paused/ if need be, reads it once, then keeps the
// cached set fresh until ctx is done: on every inotify event in paused/,
// and every PauseRescan (which also covers a paused/ replaced or made
// after the watch began).
func (a *Agent) watchPauses(ctx context.Context) func() {
	if err := pause.Ensure(a.spool.Root); err != nil {
		a.log.Error().Err(err).Msg("cannot make paused/: pauses are read by periodic listing only")
	}
	a.refreshPauses()
	ctx, cancel := context.WithCancel(ctx)
	w := fsq.StartWatch(ctx, fsq.WatchConfig{
		Dirs: []string{pause.DirPath(a.spool.Root)}, Rescan: a.cfg.PauseRescan, NoNotify: a.cfg.NoNotify,
		OnFallback: func(err error) {
			a.log.Debug().Err(err).Dur("pause_rescan_ms", a.cfg.PauseRescan).Msg("no inotify watch on paused/: it is listed periodically")
		},
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.Events:
				// Whatever the event, list again: the directory is small.
				// Drain what queued meanwhile: one listing for a burst.
				for drained := false; !drained; {
					select {
					case <-w.Events:
					default:
						drained = true
					}
				}
				a.refreshPauses()
			}
		}
	}()
	return func() {
		cancel()
		_ = w.Stop()
		<-done
	}
}
