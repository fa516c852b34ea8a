package crawlb

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/farro-dev/farro/bench/internal/sys"
)

// EnsureTools installs nginx (nginx-light, else nginx) and wget from
// Debian's packages when they are missing.
func EnsureTools(logf func(string, ...any)) error {
	var missing []string
	if NginxBin() == "" {
		missing = append(missing, "nginx-light")
	}
	if _, err := exec.LookPath("wget"); err != nil {
		missing = append(missing, "wget")
	}
	if len(missing) == 0 {
		return nil
	}
	if err := sys.AptInstall(logf, missing...); err != nil {
		if missing[0] != "nginx-light" {
			return err
		}
		// nginx-light is gone from newer Debian releases: plain nginx.
		missing[0] = "nginx"
		if err2 := sys.AptInstallNoUpdate(missing...); err2 != nil {
			return fmt.Errorf("%v; then %v", err, err2)
		}
	}
	if NginxBin() == "" {
		return fmt.Errorf("nginx installed but not found in PATH or /usr/sbin")
	}
	return nil
}

// NginxBin is the nginx binary, or "".
func NginxBin() string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	return ""
}

func tailStr(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Nginx is a private nginx serving a Site on 127.0.0.1, its access log in
// its own directory.
type Nginx struct {
	Dir       string
	Port      int
	AccessLog string
	proc      *sys.Proc
}

// StartNginx writes a configuration under dir and starts nginx in the
// foreground (daemon off, so that it is our child and stopped by PID).
func StartNginx(dir, root, logDir string) (*Nginx, error) {
	bin := NginxBin()
	if bin == "" {
		return nil, fmt.Errorf("nginx is not installed")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := sys.FreePort()
	if err != nil {
		return nil, err
	}
	n := &Nginx{Dir: dir, Port: port, AccessLog: filepath.Join(dir, "access.log")}
	user := ""
	if os.Geteuid() == 0 {
		user = "user nobody nogroup;"
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
    log_format bench '$msec $status $body_bytes_sent $connection "$request_uri" "$http_user_agent"';
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    default_type text/html;
    types { text/html html; text/plain txt; }
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 75s;
    keepalive_requests 100000;
    server {
        listen 127.0.0.1:%[3]d;
        server_name _;
        root %[4]s;
        access_log %[5]s bench;
        location / { try_files $uri =404; }
    }
}
`, user, dir, port, root, n.AccessLog)
	cpath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cpath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-p", dir, "-c", cpath, "-e", filepath.Join(dir, "error.log"))
	p, err := sys.Start("nginx", cmd, filepath.Join(logDir, "nginx.log"))
	if err != nil {
		return nil, err
	}
	n.proc = p
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if p.Exited() || time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			n.Stop()
			return nil, fmt.Errorf("nginx did not listen on 127.0.0.1:%d: %s", port, tailStr(string(b), 1000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return n, nil
}

// URL of path on the server.
func (n *Nginx) URL(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", n.Port, path) }

// Stop stops nginx (SIGQUIT, graceful, by PID; SIGKILL after 10 s).
func (n *Nginx) Stop() {
	if n.proc != nil {
		n.proc.Stop(syscall.SIGQUIT, 10*time.Second)
	}
}

// Entry is one access-log line.
type Entry struct {
	At     float64
	Status int
	URI    string
	UA     string
}

// TakeLog reads the access log and empties it (nginx appends with
// O_APPEND, so the next lines start at offset 0).
func (n *Nginx) TakeLog() ([]Entry, error) {
	f, err := os.Open(n.AccessLog)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fs := strings.SplitN(line, " ", 5)
		if len(fs) < 5 {
			continue
		}
		at, _ := strconv.ParseFloat(fs[0], 64)
		st, _ := strconv.Atoi(fs[1])
		rest := fs[4]
		uri, ua := rest, ""
		if i := strings.Index(rest, `" "`); i >= 0 {
			uri, ua = rest[:i+1], rest[i+2:]
		}
		out = append(out, Entry{At: at, Status: st, URI: strings.Trim(uri, `"`), UA: strings.Trim(ua, `"`)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := os.Truncate(n.AccessLog, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// LogStats are the figures of one tool's run from the access log.
type LogStats struct {
	Requests   int // all requests
	Pages      int // distinct /p/ URIs answered 200
	Duplicates int // requests of a /p/ URI beyond its first
	Other      int // requests outside /p/ (robots.txt, ...)
	Non200     int // /p/ requests not answered 200
}

// Stats counts the log's requests.
func Stats(es []Entry) LogStats {
	var s LogStats
	seen := map[string]bool{}
	for _, e := range es {
		s.Requests++
		if !strings.HasPrefix(e.URI, "/p/") {
			s.Other++
			continue
		}
		if e.Status != 200 {
			s.Non200++
		}
		if seen[e.URI] {
			s.Duplicates++
			continue
		}
		seen[e.URI] = true
		if e.Status == 200 {
			s.Pages++
		}
	}
	return s
}
