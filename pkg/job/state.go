package job

// State is a job's status. Each state is a directory of the spool; the doc
// of every constant says who moves jobs out of it.
type State string

const (
	// Queued jobs wait in incoming/. agentd claims them (-> in-progress);
	// an operator may hold or cancel them.
	Queued State = "queued"
	// InProgress jobs live in in-progress/<agent>/. Their agent commits
	// them; watchdogd moves them to stale/ when the agent dies or goes
	// silent; a drained agent releases them back to queued.
	InProgress State = "in-progress"
	// Succeeded is terminal (completed/succeeded/). Only retention and
	// an operator's rm (Spool.Remove) remove these jobs; an operator's
	// retry --succeeded (Spool.Retry) is the one way back to queued.
	Succeeded State = "succeeded"
	// Failed jobs (completed/failed/) ran and failed. managerd retries them
	// through deferred/ or kills them when out of attempts.
	Failed State = "failed"
	// Stale jobs lost their agent (stale/). managerd requeues them or kills
	// them when out of attempts.
	Stale State = "stale"
	// Killed is terminal (completed/killed/): cancelled, killed by an
	// operator, or out of attempts; the reason says which. Only an
	// operator's retry (Spool.Retry) takes it back to queued; retention
	// and rm (Spool.Remove) delete it.
	Killed State = "killed"
	// Deferred jobs (deferred/) are queued but not before their not_before
	// time. managerd promotes them to incoming/ when due.
	Deferred State = "deferred"
	// Held jobs (held/) are paused by an operator, who releases (-> queued)
	// or kills them.
	Held State = "held"
)

// States lists every state, in lifecycle order.
var States = []State{Queued, Deferred, Held, InProgress, Stale, Failed, Succeeded, Killed}

// transitions is the legal-transitions map: the only state changes a
// commit may apply. Succeeded and killed have none, for every daemon;
// Spool.Retry, an operator's own transaction, is the one exception.
var transitions = map[State][]State{
	Queued:     {InProgress, Held, Killed},
	InProgress: {Succeeded, Failed, Stale, Held, Killed, Queued},
	Failed:     {Queued, Deferred, Killed},
	Stale:      {Queued, Deferred, Killed},
	Deferred:   {Queued, Held, Killed},
	Held:       {Queued, Killed},
	Succeeded:  nil,
	Killed:     nil,
}

// CanTransition reports whether from -> to is in the legal-transitions map.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	_, ok := transitions[s]
	return ok
}

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool { return s.Valid() && len(transitions[s]) == 0 }

// Dir is the spool directory of s, relative to the spool root. For
// InProgress it is the parent of the per-agent directories.
func (s State) Dir() string {
	switch s {
	case Queued:
		return "incoming"
	case InProgress:
		return "in-progress"
	case Succeeded:
		return "completed/succeeded"
	case Failed:
		return "completed/failed"
	case Killed:
		return "completed/killed"
	}
	return string(s) // stale, deferred, held
}

// Transitions returns a copy of the legal-transitions map, for a store
// that enforces it outside Go too (pkg/store/pgstore's trigger table is
// checked against it). Retry's exception is not in it.
func Transitions() map[State][]State {
	m := make(map[State][]State, len(transitions))
	for from, tos := range transitions {
		m[from] = append([]State(nil), tos...)
	}
	return m
}
