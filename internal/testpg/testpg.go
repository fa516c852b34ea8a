// Package testpg starts a private PostgreSQL for tests (and the bench):
// initdb in a temporary directory, postgres on 127.0.0.1 on a free port
// and on a unix socket in that directory, with the durability settings of
// a real deployment (fsync on, synchronous_commit on), stopped by its PID.
// As root, initdb and postgres run as the postgres system user that
// Debian's package creates.
//
// A test binary starts one server (Start, the first time it is called)
// and each test takes a fresh database on it (NewDatabase), so tests run
// in parallel. Call Main from the package's TestMain to stop the server
// when the tests are done; without it the server is stopped when the test
// binary exits (it gets SIGINT as its parent dies).
//
// There is no skip: without PostgreSQL's binaries the test fails with a
// one-line message saying how to install them.
package testpg

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled: no PostgreSQL server binaries were found.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres): apt-get install postgresql")

// Bin returns the directory of PostgreSQL's server binaries (initdb,
// postgres), the newest version's, or "" when there are none.
func Bin() string {
	ms, _ := filepath.Glob(binGlob)
	sort.Slice(ms, func(i, j int) bool { return pgMajor(ms[i]) < pgMajor(ms[j]) })
	for i := len(ms) - 1; i >= 0; i-- {
		dir := filepath.Dir(ms[i])
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir
		}
	}
	return ""
}

// pgMajor is the version in /usr/lib/postgresql/<v>/bin/postgres.
func pgMajor(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

// binGlob is where Debian's packages put the server binaries.
var binGlob = "/usr/lib/postgresql/*/bin/postgres"

// User is the database superuser of a server started here.
const User = "farro"

// Server is a running private PostgreSQL.
type Server struct {
	Dir    string // its directory: data/, sock/, postgres.log
	Port   int    // on 127.0.0.1
	Socket string // the unix socket's directory
	URL    string // postgres://farro@127.0.0.1:PORT/postgres?sslmode=disable
	cmd    *exec.Cmd
	exited chan struct{}
	stop   sync.Once
	bin    string
	cred   *syscall.Credential
	extra  []string // StartServerWith's settings, kept by Restart
}

// StartServer runs initdb and postgres in dir (created if needed), and
// waits until the server accepts connections (at most a minute).
func StartServer(dir string) (*Server, error) { return StartServerWith(dir) }

// StartServerWith is StartServer with more server settings, each
// "name=value" (postgres -c), after the durability settings, which they
// must not weaken: a probe of the bench preloads pg_stat_statements with
// it ("shared_preload_libraries=pg_stat_statements").
func StartServerWith(dir string, settings ...string) (*Server, error) {
	for _, kv := range settings {
		name, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok || name == "":
			return nil, fmt.Errorf("testpg: setting %q is not name=value", kv)
		case name == "fsync" || name == "synchronous_commit" || name == "full_page_writes":
			return nil, fmt.Errorf("testpg: setting %q would change the durability settings", kv)
		}
	}
	bin := Bin()
	if bin == "" {
		return nil, ErrNotInstalled
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs the postgres user to run PostgreSQL (apt-get install postgresql creates it): %w", err)
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
		if err := os.Chmod(d, 0o755); err != nil { // t.TempDir's are 0700
			return nil, err
		}
		if cred != nil {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", User, "--auth=trust", "-E", "UTF8", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, strings.TrimSpace(string(out)))
	}
	var lastErr error
	for try := 0; try < 3; try++ { // a free port can be taken before postgres binds it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := startPostgres(bin, dir, data, sock, port, cred, settings)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startPostgres(bin, dir, data, sock string, port int, cred *syscall.Credential, extra []string) (*Server, error) {
	logPath := filepath.Join(dir, "postgres.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", sock,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "synchronous_commit=on",
		"-c", "full_page_writes=on", "-c", "max_connections=200")
	for _, kv := range extra {
		cmd.Args = append(cmd.Args, "-c", kv)
	}
	// Pdeathsig: a test binary that dies (a panic, a timeout) takes its
	// server with it (SIGINT: PostgreSQL's fast shutdown).
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGINT, Setpgid: true}
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Server{Dir: dir, Port: port, Socket: sock, cmd: cmd, exited: make(chan struct{}), bin: bin, cred: cred, extra: extra,
		URL: fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", User, port)}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL)
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("postgres exited at start: %v (log %s: %s)", err, logPath, lastLine(logPath))
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("postgres did not accept connections within a minute: %v (log %s)", err, logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PID is the postmaster's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Stop shuts the server down by its PID (SIGINT: fast shutdown; SIGKILL
// to its process group after 30 s) and waits for it.
func (s *Server) Stop() {
	s.stop.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
	})
}

// Kill crashes the server: SIGKILL to the postmaster and every backend
// (its process group), as a power cut or the OOM killer would, and waits
// for the postmaster to be gone. Restart starts it again on the same
// data directory and port; PostgreSQL recovers from its WAL.
func (s *Server) Kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// Restart starts a server stopped by Kill (or Stop) again on the same
// data directory, port and socket, and waits until it accepts
// connections. A crashed server's backends may take a moment to exit
// and free the port: Restart tries again for up to a minute.
func (s *Server) Restart() error {
	select {
	case <-s.exited:
	default:
		return fmt.Errorf("testpg: restart of a server that is still running (pid %d)", s.cmd.Process.Pid)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := startPostgres(s.bin, s.Dir, filepath.Join(s.Dir, "data"), s.Socket, s.Port, s.cred, s.extra)
		if err == nil {
			s.cmd, s.exited = n.cmd, n.exited
			s.stop = sync.Once{}
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var (
	once    sync.Once
	shared  *Server
	tempDir string
	errOnce error
)

// Start returns the URL of this test binary's private PostgreSQL (its
// "postgres" database), starting it the first time. Tests should not
// use that database itself: NewDatabase gives each its own.
func Start(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if Bin() == "" {
			errOnce = ErrNotInstalled
			return
		}
		tempDir, errOnce = os.MkdirTemp("", "farro-testpg-")
		if errOnce != nil {
			return
		}
		shared, errOnce = StartServer(tempDir)
		if errOnce != nil {
			_ = os.RemoveAll(tempDir)
		}
	})
	if errOnce != nil {
		t.Fatalf("testpg: %v", errOnce)
	}
	return shared.URL
}

// StartPrivate starts a server of the test's own (not the binary's
// shared one), for a test that crashes or restarts it; it is stopped and
// its directory removed when the test ends. Its directory is not under
// t.TempDir, whose parents the postgres user may not enter.
func StartPrivate(t testing.TB) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "farro-testpg-")
	if err != nil {
		t.Fatalf("testpg: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s, err := StartServer(dir)
	if err != nil {
		t.Fatalf("testpg: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Main runs the package's tests (from TestMain) and then stops the
// server Start started, if any, and removes its directory.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the server Start started, if any, and removes its
// directory: Main's end, for a TestMain that runs the tests otherwise
// (goleak.VerifyTestMain, with Stop in its cleanup).
func Stop() {
	if shared != nil {
		shared.Stop()
		_ = os.RemoveAll(tempDir)
	}
}

// NewDatabase creates a fresh, empty database on the server at serverURL
// (from Start) and returns its URL; it is dropped when the test ends.
func NewDatabase(t testing.TB, serverURL string) string {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatalf("testpg: %v", err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testpg: %v", err)
	}
	name := fmt.Sprintf("t_%x", b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		t.Fatalf("testpg: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testpg: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, serverURL)
		if err != nil {
			t.Errorf("testpg: drop database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("testpg: drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
