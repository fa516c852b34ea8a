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
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/farro-dev/farro/bench/internal/sys"
)

// Postgres is a private PostgreSQL instance (initdb under a temp dir,
// listening on 127.0.0.1 only, default durability: fsync=on,
// synchronous_commit=on).
type Postgres struct {
	Dir  string
	Port int
	DSN  string
	proc *sys.Proc
}

// StartPostgres runs initdb and postgres in dir. As root, both run as the
// postgres system user (which Debian's package creates).
func StartPostgres(dir, logDir string) (*Postgres, error) {
	bin := sys.PGBin()
	if bin == "" {
		return nil, fmt.Errorf("postgresql is not installed")
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs the postgres user to run PostgreSQL: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{dir, sock} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		if cred != nil {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	port, err := sys.FreePort()
	if err != nil {
		return nil, err
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "bench", "--auth=trust", "-E", "UTF8", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", sock,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "full_page_writes=on")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = dir
	logPath := filepath.Join(logDir, "postgres.log")
	p, err := sys.Start("postgres", cmd, logPath)
	if err != nil {
		return nil, err
	}
	pg := &Postgres{Dir: dir, Port: port, proc: p,
		DSN: fmt.Sprintf("postgres://bench@127.0.0.1:%d/postgres?sslmode=disable", port)}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, pg.DSN)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return pg, nil
		}
		if p.Exited() || time.Now().After(deadline) {
			pg.Stop()
			return nil, fmt.Errorf("postgres did not start: %v (log %s)", err, logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// PID is the postmaster's process id (its backends are its children:
// sys.TreeCPU of it is the instance's CPU time).
func (p *Postgres) PID() int { return p.proc.PID() }

// Stop shuts PostgreSQL down (SIGINT to its PID: fast shutdown).
func (p *Postgres) Stop() {
	p.proc.Stop(syscall.SIGINT, 30*time.Second)
}

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
