package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

// Kinds of daemons in the agents table.
const (
	KindAgentd    = "agentd"
	KindManagerd  = "managerd"
	KindWatchdogd = "watchdogd"
)

// ExitAlreadyRunning is the exit status of a daemon refused because its
// id is registered live from another host: the spool registry's
// (internal/registry.ExitAlreadyRunning), which the systemd units do not
// restart.
const ExitAlreadyRunning = 150

// Registration is what a daemon says of itself in the agents table.
type Registration struct {
	Kind    string // KindAgentd, KindManagerd, KindWatchdogd
	ID      string // agentd: its agent id; managerd, watchdogd: the host
	Host    string
	PID     int
	Version string
	// Concurrency and Kinds are agentd's (--concurrency, the kinds it
	// runs); MaxAttempts is managerd's --max-attempts.
	Concurrency int
	Kinds       []string
	MaxAttempts int
	// Fresh is how long one heartbeat keeps the row live (a few
	// heartbeat intervals). While it is, the same id from another host
	// is refused.
	Fresh time.Duration
}

// AlreadyRunningError refuses a registration: the same kind and id is
// live (fresh heartbeat, not stopped) from another host.
type AlreadyRunningError struct {
	What      string // "agent id w1", "managerd"
	Host      string
	PID       int
	Started   time.Time
	Heartbeat time.Duration // how long ago, on the database's clock
}

func (e *AlreadyRunningError) Error() string {
	return fmt.Sprintf("%s is already running on host %s as pid %d (started %s, last heartbeat %s ago, in the database)",
		e.What, e.Host, e.PID, e.Started.Local().Format(time.RFC3339), e.Heartbeat.Round(time.Second))
}

// ExitCode is ExitAlreadyRunning.
func (e *AlreadyRunningError) ExitCode() int { return ExitAlreadyRunning }

// ErrRegistrationLost: the row of a registered daemon is no longer its
// own (another host took the id after this one's heartbeat went stale).
var ErrRegistrationLost = errors.New("registration lost: the agents row names another process")

// Registered is a daemon's live row; Heartbeat renews it, Release stamps
// it stopped.
type Registered struct {
	s *Store
	r Registration
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// Register writes r's row (one statement): a new row, or the row of a
// stopped process, of one whose heartbeat is stale, or of this host (on
// one host the local directory's registry already keeps one process per
// id). The same id live on another host is *AlreadyRunningError.
func (s *Store) Register(ctx context.Context, r Registration) (*Registered, error) {
	if r.Kind != KindAgentd && r.Kind != KindManagerd && r.Kind != KindWatchdogd {
		return nil, fmt.Errorf("register: unknown kind %q", r.Kind)
	}
	if r.Fresh <= 0 {
		return nil, fmt.Errorf("register: fresh must be positive")
	}
	if r.Kinds == nil {
		r.Kinds = []string{}
	}
	for try := 0; ; try++ {
		var started time.Time
		err := s.pool.QueryRow(ctx, `
			INSERT INTO agents (kind, id, host, pid, version, started_at, heartbeat_at, live_until,
			                    stopped_at, concurrency, kinds, max_attempts)
			VALUES ($1, $2, $3, $4, $5, now(), now(), now() + $6 * interval '1 millisecond', NULL, $7, $8, $9)
			ON CONFLICT (kind, id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,
				version = EXCLUDED.version, started_at = EXCLUDED.started_at,
				heartbeat_at = EXCLUDED.heartbeat_at, live_until = EXCLUDED.live_until, stopped_at = NULL,
				concurrency = EXCLUDED.concurrency, kinds = EXCLUDED.kinds, max_attempts = EXCLUDED.max_attempts
			WHERE agents.host = EXCLUDED.host OR agents.stopped_at IS NOT NULL OR agents.live_until <= now()
			RETURNING started_at`,
			r.Kind, r.ID, r.Host, r.PID, r.Version, ms(r.Fresh), r.Concurrency, r.Kinds, r.MaxAttempts).Scan(&started)
		if err == nil {
			return &Registered{s: s, r: r}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("register %s %s: %w", r.Kind, r.ID, err)
		}
		e := &AlreadyRunningError{What: r.Kind}
		if r.Kind == KindAgentd {
			e.What = "agent id " + r.ID
		}
		var live bool
		err = s.pool.QueryRow(ctx, `SELECT host, pid, started_at, now() - heartbeat_at,
				stopped_at IS NULL AND live_until > now() FROM agents WHERE kind = $1 AND id = $2`,
			r.Kind, r.ID).Scan(&e.Host, &e.PID, &e.Started, &e.Heartbeat, &live)
		if err == nil && live {
			return nil, e
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("register %s %s: %w", r.Kind, r.ID, err)
		}
		if try >= 2 { // gone stale (or removed) meanwhile, more than once
			return nil, e
		}
	}
}

// Heartbeat renews the row (one UPDATE): heartbeat_at now, live for
// Fresh more. A row another process took is ErrRegistrationLost.
func (g *Registered) Heartbeat(ctx context.Context) error {
	tag, err := g.s.pool.Exec(ctx, `UPDATE agents SET heartbeat_at = now(), live_until = now() + $5 * interval '1 millisecond'
		WHERE kind = $1 AND id = $2 AND host = $3 AND pid = $4 AND stopped_at IS NULL`,
		g.r.Kind, g.r.ID, g.r.Host, g.r.PID, ms(g.r.Fresh))
	if err != nil {
		return fmt.Errorf("heartbeat of %s %s: %w", g.r.Kind, g.r.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s %s: %w", g.r.Kind, g.r.ID, ErrRegistrationLost)
	}
	return nil
}

// Release stamps the row stopped (a clean exit).
func (g *Registered) Release(ctx context.Context) error {
	_, err := g.s.pool.Exec(ctx, `UPDATE agents SET stopped_at = now(), heartbeat_at = now()
		WHERE kind = $1 AND id = $2 AND host = $3 AND pid = $4 AND stopped_at IS NULL`,
		g.r.Kind, g.r.ID, g.r.Host, g.r.PID)
	return err
}

// AgentRow is one row of the agents table as farroctl agents lists it.
type AgentRow struct {
	Kind, ID, Host string
	PID            int
	Version        string
	StartedAt      time.Time
	HeartbeatAt    time.Time
	StoppedAt      *time.Time
	Concurrency    int
	Kinds          []string
	MaxAttempts    int
	Live           bool // not stopped, heartbeat fresh (database clock)
	Running        int  // agentd: its in-progress jobs (jobs.agent)
	// Unregistered: an agent that holds running jobs but has no row (a
	// daemon older than the table).
	Unregistered bool
}

// Agents returns the agents table, agentd rows first then the others,
// each kind in ID order, with every agentd's running jobs, and the
// database's clock (for "last seen ... ago"). An agent id that holds
// running jobs without a row is listed too (Unregistered).
func (s *Store) Agents(ctx context.Context) ([]AgentRow, time.Time, error) {
	var now time.Time
	running := map[string]int{}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT agent, count(*) FROM jobs WHERE status = 'in-progress' GROUP BY agent`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var a string
			var n int
			if err := rows.Scan(&a, &n); err != nil {
				return err
			}
			running[a] = n
		}
		return rows.Err()
	})
	if err != nil {
		return nil, now, err
	}
	rows, err := s.pool.Query(ctx, `SELECT kind, id, host, pid, version, started_at, heartbeat_at, stopped_at,
		concurrency, kinds, max_attempts, stopped_at IS NULL AND live_until > now()
		FROM agents ORDER BY kind <> 'agentd', kind, id`)
	if err != nil {
		return nil, now, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AgentRow, error) {
		var a AgentRow
		err := row.Scan(&a.Kind, &a.ID, &a.Host, &a.PID, &a.Version, &a.StartedAt, &a.HeartbeatAt, &a.StoppedAt,
			&a.Concurrency, &a.Kinds, &a.MaxAttempts, &a.Live)
		return a, err
	})
	if err != nil {
		return nil, now, err
	}
	for i := range out {
		if out[i].Kind == KindAgentd {
			out[i].Running = running[out[i].ID]
			delete(running, out[i].ID)
		}
	}
	var extra []AgentRow
	for id, n := range running {
		extra = append(extra, AgentRow{Kind: KindAgentd, ID: id, Running: n, Unregistered: true})
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i].ID < extra[j].ID })
	nAgents := 0
	for nAgents < len(out) && out[nAgents].Kind == KindAgentd {
		nAgents++
	}
	out = append(out[:nAgents], append(extra, out[nAgents:]...)...)
	sort.SliceStable(out[:nAgents+len(extra)], func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, now, nil
}

// AdvertisedMaxAttempts is the max_attempts a managerd advertises (a
// live one first, else the one seen last), or 0 when none does.
func (s *Store) AdvertisedMaxAttempts(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT max_attempts FROM agents WHERE kind = 'managerd' AND max_attempts > 0
		ORDER BY (stopped_at IS NULL AND live_until > now()) DESC, heartbeat_at DESC LIMIT 1`).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}
