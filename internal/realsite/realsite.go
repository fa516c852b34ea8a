// Package realsite serves a real HTML tree that nobody here wrote (the
// PostgreSQL documentation Debian ships in postgresql-doc-15) with a
// private nginx on 127.0.0.1, runs wget --recursive over it, and compares
// crawls from nginx's own access log: the set of HTML pages each client
// fetched, duplicate fetches, and requests robots.txt forbade. The
// crawl's end-to-end test (test/crawl) and the crawl benchmark
// (bench/cmd/crawlbench) share it.
package realsite

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The tree and how it is served.
const (
	// Package is the Debian package that ships the tree.
	Package = "postgresql-doc-15"
	// DocRoot is the tree: about 1,170 interlinked HTML pages in one
	// directory.
	DocRoot = "/usr/share/doc/postgresql-doc-15/html"
	// Seed is the path crawls start from.
	Seed = "/index.html"
	// Disallowed is the path prefix the served robots.txt forbids (the
	// tutorial's pages) for every user agent.
	Disallowed = "/tutorial"
)

// RobotsTxt is the robots.txt served at the root.
const RobotsTxt = "User-agent: *\nDisallow: " + Disallowed + "\n"

// Available says why the tree cannot be served here ("" when it can):
// nginx, wget or the tree missing.
func Available() string {
	var missing []string
	if NginxBin() == "" {
		missing = append(missing, "nginx (Debian package nginx-light or nginx)")
	}
	if _, err := exec.LookPath("wget"); err != nil {
		missing = append(missing, "wget")
	}
	if fi, err := os.Stat(filepath.Join(DocRoot, "index.html")); err != nil || !fi.Mode().IsRegular() {
		missing = append(missing, DocRoot+" (Debian package "+Package+")")
	}
	if len(missing) == 0 {
		return ""
	}
	return "missing " + strings.Join(missing, ", ")
}

// NginxBin is the nginx binary, or "".
func NginxBin() string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if fi, err := os.Stat("/usr/sbin/nginx"); err == nil && fi.Mode().IsRegular() {
		return "/usr/sbin/nginx"
	}
	return ""
}

// Server is a private nginx serving a tree on 127.0.0.1.
type Server struct {
	Dir       string // configuration, logs, pid file
	Root      string
	Port      int
	AccessLog string
	cmd       *exec.Cmd
	done      chan struct{}
}

// Option changes how Start serves the tree.
type Option func(*config)

type config struct {
	robots      string // served at /robots.txt; "" serves the tree's own
	defaultType string // Content-Type of files whose extension nginx does not know
}

// TreeRobots serves the tree's own robots.txt (if it has one) instead of
// RobotsTxt.
func TreeRobots() Option { return func(c *config) { c.robots = "" } }

// DefaultType is the Content-Type of files whose extension is not html,
// css, svg or txt (application/octet-stream unless set).
func DefaultType(t string) Option { return func(c *config) { c.defaultType = t } }

// Start writes a configuration under dir and starts nginx in the
// foreground (daemon off: it is this process's child, stopped by its PID
// in Stop), serving root, with RobotsTxt at /robots.txt unless
// TreeRobots is given. It returns once nginx accepts connections.
func Start(dir, root string, opts ...Option) (*Server, error) {
	cfg := config{robots: RobotsTxt, defaultType: "application/octet-stream"}
	for _, o := range opts {
		o(&cfg)
	}
	bin := NginxBin()
	if bin == "" {
		return nil, errors.New("nginx is not installed (Debian package nginx-light or nginx)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Root: root, Port: port, AccessLog: filepath.Join(dir, "access.log"), done: make(chan struct{})}
	user := ""
	if os.Geteuid() == 0 {
		user = "user nobody nogroup;"
	}
	robots := ""
	if cfg.robots != "" {
		robots = fmt.Sprintf(`location = /robots.txt {
            default_type text/plain;
            return 200 %q;
        }`, cfg.robots)
	}
	conf := fmt.Sprintf(`%s
daemon off;
master_process on;
worker_processes 2;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    log_format real '$msec $status $body_bytes_sent "$request_uri" "$http_user_agent"';
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    types { text/html html; text/css css; image/svg+xml svg; text/plain txt; }
    default_type %[7]s;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 75s;
    keepalive_requests 100000;
    server {
        listen 127.0.0.1:%[3]d;
        server_name _;
        root %[4]s;
        access_log %[5]s real;
        %[6]s
        location / { try_files $uri =404; }
    }
}
`, user, dir, port, root, s.AccessLog, robots, cfg.defaultType)
	cpath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cpath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(dir, "nginx.out"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	s.cmd = exec.Command(bin, "-p", dir, "-c", cpath, "-e", filepath.Join(dir, "error.log"))
	s.cmd.Stdout, s.cmd.Stderr = out, out
	// Its own process group: Stop can reach the workers too if the
	// master does not stop them.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.done:
		default:
			if time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				continue
			}
		}
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		s.Stop()
		return nil, fmt.Errorf("nginx did not listen on 127.0.0.1:%d: %s", port, tail(string(b), 1000))
	}
}

// URL of path on the server.
func (s *Server) URL(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", s.Port, path) }

// HostPort is the server's host:port.
func (s *Server) HostPort() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// Stop stops nginx by its PID: SIGQUIT (graceful), then SIGKILL of its
// process group after 5 s. Safe to call twice.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// Request is one access-log line.
type Request struct {
	At     float64 // seconds since the epoch
	Status int
	URI    string
	UA     string
}

// Log reads the access log.
func (s *Server) Log() ([]Request, error) {
	f, err := os.Open(s.AccessLog)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	var out []Request
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fs := strings.SplitN(sc.Text(), " ", 4)
		if len(fs) < 4 {
			continue
		}
		at, _ := strconv.ParseFloat(fs[0], 64)
		st, _ := strconv.Atoi(fs[1])
		uri, ua, _ := strings.Cut(fs[3], `" "`)
		out = append(out, Request{At: at, Status: st, URI: strings.TrimPrefix(uri, `"`), UA: strings.TrimSuffix(ua, `"`)})
	}
	return out, sc.Err()
}

// TakeLog reads the access log and empties it, so that the next call
// returns only later requests (nginx appends with O_APPEND: its next line
// goes to the new end).
func (s *Server) TakeLog() ([]Request, error) {
	out, err := s.Log()
	if err != nil {
		return nil, err
	}
	if err := os.Truncate(s.AccessLog, 0); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return out, nil
}

// Report is what one client did, from the access log.
type Report struct {
	Requests   int            // every request
	HTML       map[string]int // HTML pages answered 200: requests per URI
	Duplicates int            // requests of a URI beyond its first (robots.txt included)
	// Forbidden lists the requests of URIs robots.txt disallowed.
	Forbidden []string
	Robots    int     // requests of /robots.txt
	Sitemaps  int     // requests of /sitemap.xml
	NotFound  int     // requests answered 404
	Seconds   float64 // first request to last
}

// Pages is the number of distinct HTML pages fetched.
func (r *Report) Pages() int { return len(r.HTML) }

// Analyze reports the requests whose User-Agent contains ua.
func Analyze(log []Request, ua string) *Report {
	r := &Report{HTML: map[string]int{}}
	seen := map[string]bool{}
	var first, last float64
	for _, q := range log {
		if !strings.Contains(q.UA, ua) {
			continue
		}
		if r.Requests == 0 || q.At < first {
			first = q.At
		}
		last = max(last, q.At)
		r.Requests++
		path, _, _ := strings.Cut(q.URI, "?")
		if seen[q.URI] {
			r.Duplicates++
		}
		seen[q.URI] = true
		switch {
		case path == "/robots.txt":
			r.Robots++
		case path == "/sitemap.xml":
			r.Sitemaps++
		case strings.HasPrefix(path, Disallowed):
			r.Forbidden = append(r.Forbidden, q.URI)
		}
		if q.Status == 404 {
			r.NotFound++
		}
		if q.Status == 200 && (strings.HasSuffix(path, ".html") || strings.HasSuffix(path, "/")) {
			r.HTML[q.URI]++
		}
	}
	if r.Requests > 0 {
		r.Seconds = last - first
	}
	return r
}

// Diff returns the HTML pages only a fetched and those only b fetched,
// sorted.
func Diff(a, b *Report) (onlyA, onlyB []string) {
	for u := range a.HTML {
		if b.HTML[u] == 0 {
			onlyA = append(onlyA, u)
		}
	}
	for u := range b.HTML {
		if a.HTML[u] == 0 {
			onlyB = append(onlyB, u)
		}
	}
	sort.Strings(onlyA)
	sort.Strings(onlyB)
	return onlyA, onlyB
}

// WgetUA is the User-Agent wget sends (its own name and version), as
// Analyze matches it.
const WgetUA = "Wget/"

// Wget crawls the server from Seed with wget --recursive --level=inf
// (one connection; robots.txt obeyed, as by default), saving the pages
// under dir (removed afterwards) and its output in logPath. wget exits 8
// when some request got an error response (the tree has links to pages
// it does not ship): that is no failure here.
func Wget(s *Server, dir, logPath string, timeout time.Duration) (time.Duration, error) {
	out := filepath.Join(dir, "wget-out")
	defer os.RemoveAll(out)
	lf, err := os.Create(logPath)
	if err != nil {
		return 0, err
	}
	defer lf.Close()
	cmd := exec.Command("wget", "--recursive", "--level=inf", "--no-verbose", "--no-host-directories",
		"--directory-prefix", out, s.URL(Seed))
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return 0, fmt.Errorf("wget not done within %s (log %s)", timeout, logPath)
	}
	el := time.Since(start)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 8 {
		err = nil
	}
	if err != nil {
		return 0, fmt.Errorf("wget: %v (log %s)", err, logPath)
	}
	return el, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
