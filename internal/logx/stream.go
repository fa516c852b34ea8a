package logx

import (
	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/pkg/job"
)

// StreamWarn is the job.Open option with which a daemon logs the event
// stream's lost lines (events/ unwritable, a hostile entry in a segment's
// place): a warning at the first, then at most one a minute, with the
// count so far. The transitions themselves are unaffected.
func StreamWarn(l zerolog.Logger) job.Option {
	return job.WithStreamWarn(func(err error, lost uint64) {
		l.Warn().Err(err).Uint64("lost_lines", lost).Msg("event stream line not written")
	})
}
