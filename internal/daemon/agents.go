package daemon

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/internal/registry"
	"github.com/farro-dev/farro/pkg/store/pgstore"
)

// AgentsEvery is how often a daemon on a PostgreSQL store renews its row
// in the agents table (one UPDATE per interval, never per job): the
// cadence of the spool registry's last_seen. A row is live for
// AgentsFresh after its last heartbeat.
var (
	AgentsEvery = registry.DefaultRefresh
	AgentsFresh = 3 * registry.DefaultRefresh
)

// Host is this host's name in the agents table (os.Hostname).
func Host() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}

// Registration is a daemon's row in a PostgreSQL store's agents table,
// heartbeating until Stop.
type Registration struct {
	g      *pgstore.Registered
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Register writes this process's row in st's agents table (r's Host,
// PID, Fresh default to this host, this process, AgentsFresh) and renews
// it every AgentsEvery until Stop. The same id live on another host is
// *pgstore.AlreadyRunningError (exit registry.ExitAlreadyRunning). A
// failed renewal is one warning line (and one line when it works again):
// the row is what `farroctl agents` shows, never what runs jobs.
func Register(ctx context.Context, log zerolog.Logger, st *pgstore.Store, r pgstore.Registration) (*Registration, error) {
	if r.Host == "" {
		r.Host = Host()
	}
	if r.PID == 0 {
		r.PID = os.Getpid()
	}
	if r.Fresh == 0 {
		r.Fresh = AgentsFresh
	}
	if r.Version == "" {
		r.Version = Version
	}
	g, err := st.Register(ctx, r)
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancel(context.Background())
	reg := &Registration{g: g, cancel: cancel, done: make(chan struct{})}
	go reg.beat(hctx, log, r)
	return reg, nil
}

func (reg *Registration) beat(ctx context.Context, log zerolog.Logger, r pgstore.Registration) {
	defer close(reg.done)
	t := time.NewTicker(AgentsEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, AgentsEvery)
		err := reg.g.Heartbeat(hctx)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			log.Warn().Err(err).Str("kind", r.Kind).Str("id", r.ID).Msg("cannot renew this daemon's row in the agents table; retrying")
		case err == nil && failing:
			failing = false
			log.Info().Str("kind", r.Kind).Str("id", r.ID).Msg("this daemon's row in the agents table is renewed again")
		}
	}
}

// Stop ends the heartbeats and stamps the row stopped. Calling it again
// does nothing.
func (reg *Registration) Stop() {
	reg.once.Do(func() {
		reg.cancel()
		<-reg.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = reg.g.Release(ctx)
	})
}
