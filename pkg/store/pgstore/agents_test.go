package pgstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

func TestAgentsRegisterRefusesSameIDFromAnotherHost(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	ctx := ctxT(t)
	r := Registration{Kind: KindAgentd, ID: "w1", Host: "host-a", PID: 100, Version: "v1",
		Concurrency: 4, Kinds: []string{"exec", "noop"}, Fresh: time.Minute}
	g, err := s.Register(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	other := r
	other.Host, other.PID = "host-b", 200
	_, err = s.Register(ctx, other)
	var are *AlreadyRunningError
	if !errors.As(err, &are) || are.Host != "host-a" || are.PID != 100 || are.ExitCode() != ExitAlreadyRunning {
		t.Fatalf("same id from another host: %v, want AlreadyRunningError naming host-a pid 100", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "agent id w1 is already running on host host-a as pid 100 (started ") || strings.Contains(msg, "\n") {
		t.Fatalf("refusal: %q", msg)
	}
	// The same host (a restart after a crash: the local registry is the
	// judge there) takes the row over.
	again := r
	again.PID = 101
	g2, err := s.Register(ctx, again)
	if err != nil {
		t.Fatalf("same host: %v", err)
	}
	if err := g.Heartbeat(ctx); !errors.Is(err, ErrRegistrationLost) {
		t.Fatalf("heartbeat of the replaced process: %v, want ErrRegistrationLost", err)
	}
	// Stopped: another host may take the id.
	if err := g2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register(ctx, other); err != nil {
		t.Fatalf("after a clean stop: %v", err)
	}
	// A stale heartbeat (live_until passed): another host may take it.
	c := sqlConn(t, url)
	if _, err := c.Exec(ctx, `UPDATE agents SET live_until = now() - interval '1 second' WHERE id = 'w1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register(ctx, r); err != nil {
		t.Fatalf("after a stale heartbeat: %v", err)
	}
}

func TestAgentsHeartbeatAndListing(t *testing.T) {
	t.Parallel()
	s, url := newStore(t)
	ctx := ctxT(t)
	g, err := s.Register(ctx, Registration{Kind: KindAgentd, ID: "w1", Host: "h1", PID: 10, Version: "v9",
		Concurrency: 3, Kinds: []string{"exec"}, Fresh: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Register(ctx, Registration{Kind: KindManagerd, ID: "h1", Host: "h1", PID: 11, MaxAttempts: 7, Fresh: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.AdvertisedMaxAttempts(ctx); err != nil || n != 7 {
		t.Fatalf("advertised max attempts %d, %v; want 7", n, err)
	}
	c := sqlConn(t, url)
	if _, err := c.Exec(ctx, `UPDATE agents SET heartbeat_at = now() - interval '1 hour' WHERE id = 'w1'`); err != nil {
		t.Fatal(err)
	}
	if err := g.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	submit(t, s, job.SubmitRequest{ID: "j1"}, job.SubmitRequest{ID: "j2"}, job.SubmitRequest{ID: "j3"})
	claimOne(t, s, "w1", time.Minute)
	claimOne(t, s, "w1", time.Minute)
	claimOne(t, s, "ghost", time.Minute)
	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rows, now, err := s.Agents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(rows), rows)
	}
	a, gh, md := rows[0], rows[1], rows[2]
	if gh.ID != "ghost" || a.ID != "w1" { // agents in ID order, then the daemons
		a, gh = gh, a
	}
	if a.ID != "w1" || a.Host != "h1" || a.PID != 10 || a.Version != "v9" || a.Concurrency != 3 ||
		len(a.Kinds) != 1 || a.Kinds[0] != "exec" || !a.Live || a.Running != 2 || a.Unregistered {
		t.Fatalf("w1: %+v", a)
	}
	if d := now.Sub(a.HeartbeatAt); d < 0 || d > time.Minute {
		t.Fatalf("heartbeat_at %v is not renewed (database now %v)", a.HeartbeatAt, now)
	}
	if gh.ID != "ghost" || !gh.Unregistered || gh.Running != 1 || gh.Live {
		t.Fatalf("ghost: %+v", gh)
	}
	if md.Kind != KindManagerd || md.Live || md.StoppedAt == nil || md.MaxAttempts != 7 {
		t.Fatalf("managerd: %+v", md)
	}
	// A stopped managerd's limit is still the one advertised last.
	if n, err := s.AdvertisedMaxAttempts(ctx); err != nil || n != 7 {
		t.Fatalf("advertised max attempts after stop %d, %v; want 7", n, err)
	}
}
