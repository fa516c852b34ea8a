// Package peers runs the job queues farro is compared with, River
// (Go + PostgreSQL, or an embedded SQLite file) and asynq (Go + Redis), used
// as libraries against private, durable PostgreSQL and Redis instances on
// loopback and a SQLite file beside the spool.
package peers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/internal/testpg"
)

// Postgres is a private PostgreSQL instance: internal/testpg's server
// (initdb under dir, listening on 127.0.0.1 only, default durability:
// fsync=on, synchronous_commit=on, full_page_writes=on; as root it runs as
// the postgres system user, which Debian's package creates). Its log is
// dir/postgres.log.
type Postgres struct {
	Dir  string
	Port int
	DSN  string
	srv  *testpg.Server
}

// StartPostgres starts the instance in dir and returns once it accepts
// connections.
func StartPostgres(dir string) (*Postgres, error) {
	srv, err := testpg.StartServer(dir)
	if err != nil {
		return nil, err
	}
	return &Postgres{Dir: dir, Port: srv.Port, DSN: srv.URL, srv: srv}, nil
}

// PID is the postmaster's process id (its backends are its children:
// sys.TreeCPU of it is the instance's CPU time).
func (p *Postgres) PID() int { return p.srv.PID() }

// Stop shuts PostgreSQL down (SIGINT to its PID: fast shutdown).
func (p *Postgres) Stop() { p.srv.Stop() }

// Redis is a private redis-server with an append-only file fsynced on
// every write (appendonly yes, appendfsync always) and no RDB snapshots.
type Redis struct {
	Dir  string
	Addr string
	proc *sys.Proc
}

// StartRedis starts redis-server in dir on a free loopback port.
func StartRedis(dir, logDir string) (*Redis, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := sys.FreePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no")
	cmd.Dir = dir
	logPath := filepath.Join(logDir, "redis.log")
	p, err := sys.Start("redis-server", cmd, logPath)
	if err != nil {
		return nil, err
	}
	r := &Redis{Dir: dir, Addr: fmt.Sprintf("127.0.0.1:%d", port), proc: p}
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			break
		}
		if p.Exited() || time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("redis-server did not start: %v (log %s)", err, logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Check that the durable configuration is in effect.
	v, err := c.ConfigGet(context.Background(), "appendfsync").Result()
	if err != nil || v["appendfsync"] != "always" {
		r.Stop()
		return nil, fmt.Errorf("redis-server: appendfsync is %v (%v), want always", v, err)
	}
	return r, nil
}

// Stop stops redis-server (SIGTERM to its PID).
func (r *Redis) Stop() {
	r.proc.Stop(syscall.SIGTERM, 30*time.Second)
}
