// Package logx builds farro's structured loggers: one JSON object per line
// on stdout with the fields of seed 002 section 7.2 (timestamp with
// milliseconds, level, message, app, actor, job_id, correlation_id, and
// event{type,from,to} on every transition).
package logx

import (
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/pkg/job"
)

// App is the value of the app field of every line.
const App = "farro"

func init() {
	zerolog.TimestampFieldName = "timestamp"
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
	zerolog.TimestampFunc = func() time.Time { return time.Now().UTC() }
	zerolog.ErrorFieldName = "error"
}

// New returns a logger writing JSON lines to w (stdout when nil) as actor,
// e.g. "agentd/w1", at the given level name ("" means info). When w is the
// stream systemd connected to the journal, each line carries its syslog
// priority prefix (see JournalWriter).
func New(w io.Writer, actor, level string) zerolog.Logger {
	if w == nil {
		w = os.Stdout
	}
	w = ForJournal(w)
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Str("app", App).Str("actor", actor).Logger()
}

// JobLogger logs about one job. Its embedded Logger carries the job's
// job_id and correlation_id, for the job's ordinary lines; Transition logs
// from the logger ForJob was given, which does not carry them, so that a
// transition line has each key once (zerolog cannot tell which fields a
// logger already has: adding job_id to a logger that has it writes the key
// twice).
type JobLogger struct {
	zerolog.Logger
	base zerolog.Logger
}

// ForJob returns l with the job's id and the correlation id of its current
// attempt, for lines about job j. l must not carry them already.
func ForJob(l zerolog.Logger, j *job.Job) JobLogger {
	return JobLogger{Logger: jobFields(l.With(), j).Logger(), base: l}
}

func jobFields(c zerolog.Context, j *job.Job) zerolog.Context {
	c = c.Str("job_id", j.ID)
	if j.CorrelationID != "" {
		c = c.Str("correlation_id", j.CorrelationID)
	}
	return c
}

// Transition logs a state change of j as Transition does, from the logger
// l was made from.
func (l JobLogger) Transition(j *job.Job, from job.State) {
	Transition(l.base, j, from)
}

// Transition logs a state change of j (already carrying its new status and
// reason) as a state_transition event: job_id, correlation_id (if any),
// kind, reason (if any), attempt and event{type,from,to}. It adds these
// fields itself, so l must carry none of them: pass the daemon's logger,
// or use JobLogger.Transition.
func Transition(l zerolog.Logger, j *job.Job, from job.State) {
	ev := l.Info()
	if j.Status == job.Killed || j.Status == job.Failed || j.Status == job.Stale {
		ev = l.Warn()
	}
	ev = ev.Str("job_id", j.ID)
	if j.CorrelationID != "" {
		ev = ev.Str("correlation_id", j.CorrelationID)
	}
	if j.Kind != "" {
		ev = ev.Str("kind", j.Kind)
	}
	if j.Reason != "" {
		ev = ev.Str("reason", j.Reason)
	}
	ev.Int("attempt", j.Attempts).
		Dict("event", zerolog.Dict().Str("type", "state_transition").Str("from", string(from)).Str("to", string(j.Status))).
		Msg("job status changed")
}
