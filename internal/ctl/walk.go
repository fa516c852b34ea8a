package ctl

import (
	"path/filepath"
	"strings"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// entry is one name found in a state directory: a job directory, or
// something hostile (a symlink or plain file) where a job must be.
type entry struct {
	State   job.State
	Agent   string // in-progress only ("" for a hostile entry of in-progress/ itself)
	Name    string
	Path    string
	Hostile bool
}

// walk lists the entries of the given states (all when empty), in the
// order of job.States, names sorted. Claim locks (incoming/*.lock) are
// skipped; dot files (temp files) too.
func walk(s *job.Spool, states []job.State) ([]entry, error) {
	if len(states) == 0 {
		states = job.States
	}
	var out []entry
	add := func(st job.State, agent, dir string, es fsq.Entries) {
		for _, name := range es.Dirs {
			if st == job.Queued && strings.HasSuffix(name, job.LockSuffix) {
				continue
			}
			out = append(out, entry{State: st, Agent: agent, Name: name, Path: filepath.Join(dir, name)})
		}
		for _, name := range es.Hostile {
			out = append(out, entry{State: st, Agent: agent, Name: name, Path: filepath.Join(dir, name), Hostile: true})
		}
	}
	for _, st := range states {
		dir := s.StateDir(st)
		es, err := fsq.ScanDir(dir)
		if err != nil {
			return nil, err
		}
		if st != job.InProgress {
			add(st, "", dir, es)
			continue
		}
		for _, name := range es.Hostile {
			out = append(out, entry{State: st, Name: name, Path: filepath.Join(dir, name), Hostile: true})
		}
		for _, agent := range es.Dirs {
			adir := filepath.Join(dir, agent)
			jes, err := fsq.ScanDir(adir)
			if err != nil {
				return nil, err
			}
			add(st, agent, adir, jes)
		}
	}
	return out, nil
}

// locks lists the claim lock directories in incoming/ (their job IDs).
func locks(s *job.Spool) ([]string, error) {
	es, err := fsq.ScanDir(s.StateDir(job.Queued))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, name := range es.Dirs {
		if strings.HasSuffix(name, job.LockSuffix) {
			ids = append(ids, strings.TrimSuffix(name, job.LockSuffix))
		}
	}
	return ids, nil
}

// ParseState accepts a state name (queued, in-progress, ...) or its
// directory (incoming, completed/failed, ...).
func ParseState(name string) (job.State, bool) {
	name = strings.TrimSuffix(strings.TrimSpace(name), "/")
	for _, st := range job.States {
		if name == string(st) || name == st.Dir() {
			return st, true
		}
	}
	return "", false
}

func stateNames() string {
	names := make([]string, len(job.States))
	for i, st := range job.States {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}
