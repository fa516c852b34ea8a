// Package dashboard is farroctl serve: a read-only web view of the spool
// or the PostgreSQL store (overview, jobs, a job, crawls) rendered on the server with
// html/template, and, when enabled, the operator actions of farroctl
// behind a per-start token. Every read goes through internal/ctl, the
// code of farroctl's own commands.
package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/farro-dev/farro/internal/ctl"
)

// Config configures a Server.
type Config struct {
	// Ctl reads the spool (Root), or the PostgreSQL store (Store) through
	// one pool (ctl.OpenStorePool, as Run opens it); its Stdout and
	// Stderr are not used.
	Ctl *ctl.Ctl
	// Actions enables the operator actions (hold, release, cancel,
	// requeue, kill, retry, rm), each of which must carry Token.
	Actions bool
	Token   string
	// AllowRemote accepts any Host header; otherwise only loopback
	// addresses and localhost are served (a DNS-rebinding guard).
	AllowRemote bool
	PageSize    int           // jobs per page (default 50)
	Refresh     time.Duration // the overview reloads itself this often (0: never)
	// ShapeEvery is how old the age shape (stats --ages, which reads
	// every job.json) may get before a view of the overview has it
	// computed again in the background (default 1m).
	ShapeEvery time.Duration
	// ShapeWait is how long the overview waits for a shape being
	// computed before it renders without it (default 1s).
	ShapeWait time.Duration
	// OutputTail bounds the bytes of each output file shown (default 8 KiB).
	OutputTail int64
	// RequestTimeout bounds each request's work on a PostgreSQL store
	// (default RequestTimeout); a spool's reads are bounded by its
	// capped, non-blocking readers.
	RequestTimeout time.Duration
}

// On a PostgreSQL store (Ctl.OnStore) the server reads the database
// through one pool of at most PoolMaxConns connections for its
// lifetime (Run: ctl.OpenStorePool), each request under RequestTimeout.
const (
	PoolMaxConns   = 4
	RequestTimeout = 15 * time.Second
)

// Server serves the dashboard.
type Server struct {
	cfg Config
	mux *http.ServeMux

	shapeMu  sync.Mutex
	shape    *ctl.Shape
	shapeErr error
	shapeRun chan struct{} // closed when the running computation ends; nil when none runs

	hour hourWindow // the last hour of the event stream, read incrementally
}

// CookieName is the cookie that carries the token after /login.
const CookieName = "farro_token"

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Ctl == nil {
		return nil, errors.New("dashboard: no spool or store")
	}
	if cfg.Actions && len(cfg.Token) < 16 {
		return nil, errors.New("dashboard: actions need a token of at least 16 characters")
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 50
	}
	if cfg.ShapeEvery <= 0 {
		cfg.ShapeEvery = time.Minute
	}
	if cfg.ShapeWait <= 0 {
		cfg.ShapeWait = time.Second
	}
	if cfg.OutputTail <= 0 {
		cfg.OutputTail = 8 << 10
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = RequestTimeout
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /{$}", s.overview)
	s.mux.HandleFunc("GET /jobs", s.jobs)
	s.mux.HandleFunc("GET /jobs/{id}", s.jobPage)
	s.mux.HandleFunc("POST /jobs/{id}/{action}", s.act)
	s.mux.HandleFunc("GET /crawls", s.crawls)
	s.mux.HandleFunc("GET /crawls/{name}", s.crawlPage)
	s.mux.HandleFunc("GET /login", s.loginForm)
	s.mux.HandleFunc("POST /login", s.login)
	return s, nil
}

// ServeHTTP guards every request (Host, security headers) and routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // no-referrer would make browsers send Origin: null on our own forms
	h.Set("Cache-Control", "no-store")
	if !s.cfg.AllowRemote && !loopbackHost(r.Host) {
		http.Error(w, "farroctl serve: refused: Host "+r.Host+" is not a loopback address (start with --allow-remote to serve other hosts)", http.StatusMisdirectedRequest)
		return
	}
	if s.cfg.Ctl.OnStore() {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	s.mux.ServeHTTP(w, r)
}

// ctl is the Ctl of request r: on a database, bounded by r's context
// (ServeHTTP's timeout, or the client going away).
func (s *Server) ctl(r *http.Request) *ctl.Ctl {
	if !s.cfg.Ctl.OnStore() {
		return s.cfg.Ctl
	}
	return s.cfg.Ctl.WithContext(r.Context())
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost or a loopback IP, with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NewToken returns a fresh random token (128 bits, hex).
func NewToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func (s *Server) tokenOK(got string) bool {
	return s.cfg.Actions && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) == 1
}

// authed reports whether the request carries the token's cookie.
func (s *Server) authed(r *http.Request) bool {
	c, err := r.Cookie(CookieName)
	return err == nil && s.tokenOK(c.Value)
}

// sameOrigin refuses a POST that a browser says comes from another
// origin: its Origin (when sent) must be this server, and its
// Sec-Fetch-Site (when sent) same-origin or none (typed by the user).
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true // not a browser, or one that sends no Origin: the token decides
	}
	u, err := url.Parse(o)
	return err == nil && o != "null" && strings.EqualFold(u.Host, r.Host)
}

// Options are farroctl serve's flags.
type Options struct {
	Listen      string // host:port (default 127.0.0.1:8080)
	AllowRemote bool   // allow a non-loopback --listen (with a warning)
	Actions     bool
	Refresh     time.Duration
	PageSize    int
	Stdout      io.Writer
	Stderr      io.Writer
	// Context ends the server (nil: it runs until the process is stopped).
	Context context.Context
}

// CheckListen refuses an address that is not loopback unless
// allowRemote (an empty host means every interface and is refused too).
func CheckListen(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %v (want host:port, e.g. 127.0.0.1:8080)", addr, err)
	}
	if port == "" {
		return fmt.Errorf("--listen %q: no port", addr)
	}
	if allowRemote {
		return nil
	}
	if host == "" {
		return fmt.Errorf("--listen %q listens on every interface; use a loopback address such as 127.0.0.1:%s, or add --allow-remote", addr, port)
	}
	ips := []net.IP{net.ParseIP(host)}
	if ips[0] == nil {
		if !strings.EqualFold(host, "localhost") {
			return fmt.Errorf("--listen %q: %q is not a loopback address; use 127.0.0.1 or ::1, or add --allow-remote", addr, host)
		}
		return nil
	}
	if !ips[0].IsLoopback() {
		return fmt.Errorf("--listen %q is not a loopback address; use 127.0.0.1 or ::1, or add --allow-remote", addr)
	}
	return nil
}

// Run is farroctl serve: it checks the address, opens the spool (or the
// PostgreSQL store's one pool), listens, prints the URL (and the token,
// with actions) and serves until the context ends.
func Run(c *ctl.Ctl, o Options) error {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:8080"
	}
	if err := CheckListen(o.Listen, o.AllowRemote); err != nil {
		return ctl.UsageError(err)
	}
	if o.Refresh < 0 {
		return ctl.Usagef("--refresh must not be negative")
	}
	where := c.Root
	if c.OnStore() {
		// Requests are bounded by their own context (ServeHTTP); the pool's
		// bound is a command's, for the age shape computed in the background.
		pooled, closePool, err := c.OpenStorePool(PoolMaxConns, ctl.StoreTimeout)
		if err != nil {
			return err
		}
		defer closePool()
		c, where = pooled, "the PostgreSQL store "+c.StoreName()
	} else {
		if _, err := c.Spool(); err != nil {
			return err
		}
		if abs, err := filepath.Abs(c.Root); err == nil {
			cc := *c
			cc.Root = abs
			c = &cc
		}
		where = c.Root
	}
	cfg := Config{Ctl: c, Actions: o.Actions, AllowRemote: o.AllowRemote, Refresh: o.Refresh, PageSize: o.PageSize}
	if o.Actions {
		tok, err := NewToken()
		if err != nil {
			return err
		}
		cfg.Token = tok
	}
	srv, err := New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	if o.AllowRemote && !addr.IP.IsLoopback() {
		fmt.Fprintf(o.Stderr, "farroctl: warning: serving %s beyond this machine (--allow-remote): anyone who can reach it sees the queue; the dashboard has no login of its own, use a firewall or a reverse proxy with authentication\n", ln.Addr())
	}
	host := addr.String()
	if addr.IP.IsUnspecified() {
		host = net.JoinHostPort("127.0.0.1", fmt.Sprint(addr.Port))
	}
	fmt.Fprintf(o.Stdout, "farroctl serve: dashboard of %s at http://%s/\n", where, host)
	if o.Actions {
		fmt.Fprintf(o.Stdout, "farroctl serve: actions enabled; token (valid until this process stops): %s\nfarroctl serve: enter it at http://%s/login\n", cfg.Token, host)
	} else {
		fmt.Fprintf(o.Stdout, "farroctl serve: read-only (--actions enables the operator actions)\n")
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(o.Stderr, "farroctl: serve: ", 0),
	}
	ctx := o.Context
	if ctx == nil {
		ctx = context.Background()
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	<-done
	return nil
}
