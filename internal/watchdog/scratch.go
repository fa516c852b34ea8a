package watchdog

import (
	"context"
	"time"
)

// scratchSweeper is what a store may offer for this host's working
// directories (pgstore: the attempts' directories kept for their output).
type scratchSweeper interface {
	SweepScratch(ctx context.Context, retention time.Duration) ([]string, error)
}

// sweepScratch removes a bounded slice of this host's kept working
// directories whose job is gone, or finished longer ago than
// ScratchRetention; one line a pass that removed some.
func (s *shared) sweepScratch(ctx context.Context) {
	sw, ok := s.cfg.Store.(scratchSweeper)
	if !ok {
		return
	}
	removed, err := sw.SweepScratch(ctx, s.cfg.ScratchRetention)
	if err != nil {
		if ctx.Err() == nil && !s.dbErr && !s.sweepErr {
			s.cfg.Log.Warn().Err(err).Msg("working directory retention pass failed; retrying every pass")
		}
		s.sweepErr = true
		return
	}
	s.sweepErr = false
	if len(removed) > 0 {
		s.cfg.Log.Info().Int("removed", len(removed)).Dur("scratch_retention_ms", s.cfg.ScratchRetention).
			Msg("removed working directories of jobs gone or finished longer ago than the retention")
	}
}
