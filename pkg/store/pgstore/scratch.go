package pgstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/farro-dev/farro/internal/scratch"
	"github.com/farro-dev/farro/pkg/job"
)

// The attempts' working directories on this host
// (<scratch>/<agent>/<job id>/) come from a pool per agent
// (internal/scratch): a claim takes a directory that already holds a
// prompt.json, writes its prompt there in place and renames it to its
// job's name; the attempt's end gives it back when it holds nothing
// worth keeping (no output). The retention sweep (SweepScratch, run by
// the host's watchdogd) removes the directories kept for their output.

// workDirs holds a Store's pools (one per agent) and its sweeper.
type workDirs struct {
	mu    sync.Mutex
	pools map[string]*scratch.Pool
	sweep *scratch.Sweeper
}

func (w *workDirs) pool(root, agent string) *scratch.Pool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pools == nil {
		w.pools = map[string]*scratch.Pool{}
	}
	p := w.pools[agent]
	if p == nil {
		p = scratch.NewPool(filepath.Join(root, agent))
		w.pools[agent] = p
	}
	return p
}

func (w *workDirs) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sweep != nil {
		w.sweep.Close()
	}
}

// takeDir gives agent's attempt of job id its working directory; placed
// tells that prompt is in it already.
func (s *Store) takeDir(agent, id string, prompt []byte) (dir string, placed bool, err error) {
	if err := job.ValidateID(agent); err != nil {
		return "", false, fmt.Errorf("working directory: agent %w", err)
	}
	return s.dirs.pool(s.scratch, agent).Take(id, prompt)
}

// PromptPlaced tells that the claim's prompt.json is written already (a
// recycled working directory's, written in place before the directory
// took its job's name): the caller need not write it.
func (c *claim) PromptPlaced() bool { return c.placed }

// attemptOver gives the claim's working directory back to its agent's
// pool once the attempt is over: committed, or its job no longer the
// claim's. A directory with output is kept.
func (c *claim) attemptOver(err error) {
	if err != nil && !errors.Is(err, job.ErrFenced) {
		return // not over: the commit is tried again
	}
	c.mu.Lock()
	dir := c.dir
	given := c.dirGiven
	c.dirGiven = true
	c.mu.Unlock()
	if dir == "" || given {
		return
	}
	c.s.dirs.pool(c.s.scratch, c.holder.Agent).Give(dir)
}

// ScratchSweepMax bounds the entries of this host's working directories
// one SweepScratch reads (and so the job ids it asks the database about).
const ScratchSweepMax = 256

// SweepScratch removes, a bounded slice of them per call, this host's
// working directories (<scratch>/<agent>/<job id>/) whose job no longer
// exists in the database (removed by managerd's retention, or by an
// operator), or, with retention > 0, that finished in a terminal state
// (succeeded, killed: those managerd's retention removes) longer ago
// than retention on the database's clock. A failed job's directory stays
// while its row does; a queued, running or held job's is never removed.
// It returns the directories removed.
func (s *Store) SweepScratch(ctx context.Context, retention time.Duration) ([]string, error) {
	if s.scratch == "" {
		return nil, nil
	}
	s.dirs.mu.Lock()
	if s.dirs.sweep == nil {
		s.dirs.sweep = scratch.NewSweeper(s.scratch)
	}
	sw := s.dirs.sweep
	s.dirs.mu.Unlock()
	var terminal []string
	for _, st := range job.States {
		if st.Terminal() {
			terminal = append(terminal, string(st))
		}
	}
	return sw.Pass(ctx, ScratchSweepMax, func(ctx context.Context, ids []string) (map[string]bool, error) {
		rows, err := s.pool.Query(ctx, `SELECT u.id FROM unnest($1::text[]) AS u(id)
			WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = u.id AND NOT ($2::bigint > 0
				AND j.status = ANY($3::text[]) AND j.finished_at < now() - $2::bigint * interval '1 millisecond'))`,
			ids, retention.Milliseconds(), terminal)
		if err != nil {
			return nil, fmt.Errorf("working directories: %w", err)
		}
		defer rows.Close()
		due := map[string]bool{}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return nil, err
			}
			due[id] = true
		}
		return due, rows.Err()
	})
}
