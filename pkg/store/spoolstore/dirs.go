package spoolstore

import (
	"context"
	"errors"
	"sync"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
	"github.com/farro-dev/farro/pkg/store"
)

var (
	_ store.Dirs          = (*Store)(nil)
	_ store.FinishWatcher = (*Store)(nil)
)

// GetDir reads job id's job.json and says where it is (store.Dirs). With
// a hint other than in-progress the job's directory in that state is read
// first: one read when the hint is right, as a reader that watched the
// state directory would make. Otherwise, or when the job left the hinted
// state, it is located as Get does.
func (s *Store) GetDir(ctx context.Context, id string, hint job.State) (*job.Job, job.Location, error) {
	if err := job.ValidateID(id); err != nil {
		return nil, job.Location{}, err
	}
	if hint != "" && hint != job.InProgress && hint.Valid() {
		loc := job.Location{State: hint, Dir: s.sp.JobDir(hint, "", id)}
		j, err := job.ReadJob(loc.Dir)
		if err == nil {
			return j, loc, nil
		}
		if !errors.Is(err, fsq.ErrVanished) {
			return nil, loc, err
		}
	}
	var err error
	for range tries {
		if err = ctx.Err(); err != nil {
			return nil, job.Location{}, err
		}
		var loc job.Location
		if loc, err = s.locate(id); err != nil {
			return nil, job.Location{}, err
		}
		var j *job.Job
		if j, err = job.ReadJob(loc.Dir); err == nil {
			return j, loc, nil
		}
		if !errors.Is(err, fsq.ErrVanished) {
			return nil, loc, err
		}
	}
	return nil, job.Location{}, err
}

// WatchFinished watches succeeded/ and killed/ (store.FinishWatcher):
// every job directory that appears there is a wake-up, read in batches
// (o.Coalesce); an overflow of the kernel's queue, a failed set-up of
// inotify (o.OnFallback) and every o.Rescan are a Rescan.
func (s *Store) WatchFinished(ctx context.Context, o store.WatchOptions) (<-chan store.Finished, func()) {
	ctx, cancel := context.WithCancel(ctx)
	dirs := map[string]job.State{
		s.sp.StateDir(job.Succeeded): job.Succeeded,
		s.sp.StateDir(job.Killed):    job.Killed,
	}
	cfg := fsq.WatchConfig{Rescan: o.Rescan, Coalesce: o.Coalesce, OnFallback: o.OnFallback}
	if cfg.OnFallback == nil {
		cfg.OnFallback = func(error) {}
	}
	for d := range dirs {
		cfg.Dirs = append(cfg.Dirs, d)
	}
	w := fsq.StartWatch(ctx, cfg)
	out := make(chan store.Finished, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		defer w.Stop()
		for {
			var ev fsq.Event
			select {
			case <-ctx.Done():
				return
			case ev = <-w.Events:
			}
			var f store.Finished
			switch st, ok := dirs[ev.Dir]; {
			case ev.Rescan:
				f.Rescan = true
			case ok && ev.Created && job.ValidateID(ev.Name) == nil:
				f.ID, f.State = ev.Name, st
			default:
				continue
			}
			select {
			case <-ctx.Done():
				return
			case out <- f:
			}
		}
	}()
	var once sync.Once
	return out, func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}
