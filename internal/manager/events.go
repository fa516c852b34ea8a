package manager

import (
	"time"
)

// DefaultEventsRetention is how long managerd keeps the event stream's
// segments (events/<UTC hour>.jsonl) by default: a week.
const DefaultEventsRetention = 7 * 24 * time.Hour

// expireEvents removes the stream's segments whose hour ended more than
// EventsRetention ago, at most every RetentionEvery, and logs what it
// removed.
func (m *Manager) expireEvents() error {
	if m.cfg.EventsRetention <= 0 || time.Since(m.lastEventsRetain) < m.cfg.RetentionEvery {
		return nil
	}
	m.lastEventsRetain = time.Now()
	removed, err := m.store.ExpireStream(time.Now().Add(-m.cfg.EventsRetention))
	if len(removed) > 0 {
		m.log.Info().Int("removed", len(removed)).Str("oldest", removed[0]).
			Dur("events_retention_ms", m.cfg.EventsRetention).Msg("event stream segments removed by retention")
	}
	return err
}
