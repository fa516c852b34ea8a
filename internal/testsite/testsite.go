// Package testsite serves a generated web site on 127.0.0.1 under several
// host names (reached through a --resolve map), for crawl tests and the
// crawl demo: robots.txt variants (disallow rules, Crawl-delay, 404, 500,
// redirect, a group for one product token), redirects (relative,
// cross-domain, loops), 404/500 and 429 with Retry-After, slow and
// oversized responses, gzip, non-HTML content, an endless URL trap, links
// that differ only in ways normalization folds, out-of-scope links, and
// login walls (a redirect to a login page, a login form).
//
// Every request is recorded in an access log with its arrival and
// completion times, so that tests check politeness from the server's own
// point of view. Expected computes, independently of the frontier, the
// set of URLs a crawl must fetch.
package testsite

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options shapes the site.
type Options struct {
	// Fanout and Levels shape the page tree of a.site.test: the root links
	// to Fanout pages, each to Fanout-1 pages, and so on, Levels deep
	// (default 5 and 4).
	Fanout, Levels int
	// Extra hosts t1.site.test .. tN.site.test, each a tree of
	// ExtraPages pages in a chain of fanout 4 (for load and crash tests).
	ExtraHosts, ExtraPages int
	// Plain leaves out the special cases (robots variants, errors,
	// redirects, slow and huge pages): a plain tree per host.
	Plain bool
	// SlowDelay is how long /slow-ok takes (default 250ms) and
	// TooSlowDelay how long slow.site.test/ takes (default 3s).
	SlowDelay, TooSlowDelay time.Duration
	// BigBytes is the size of /big (default 3 MiB).
	BigBytes int
}

// Request is one access-log record.
type Request struct {
	Host   string    `json:"host"`   // lowercased, without port
	URI    string    `json:"uri"`    // request URI (path and query)
	UA     string    `json:"ua"`     // User-Agent
	Start  time.Time `json:"start"`  // arrival: first bytes of the request read
	Entry  time.Time `json:"entry"`  // handler entry (after parsing)
	End    time.Time `json:"end"`    // completion (handler exit)
	Status int       `json:"status"` // 499: the client went away
}

// Site is a running test site.
type Site struct {
	Opts   Options
	Server *httptest.Server
	Port   int

	mu        sync.Mutex
	log       []Request
	hits      map[string]int
	onRequest func(Request)
}

// Hosts served by the site (besides the t<N> hosts).
const (
	HostA    = "a.site.test"     // the main tree and the special cases
	HostWWWA = "www.a.site.test" // alias of a: one canonical domain
	HostB    = "b.site.test"     // Crawl-delay 0.3
	HostC    = "c.site.test"     // robots.txt 404; /limited answers 429 Retry-After once
	HostD    = "d.site.test"     // robots.txt 500: disallow all
	HostE    = "e.site.test"     // robots.txt redirected
	HostF    = "f.site.test"     // robots.txt disallows the farro-test product token
	HostSlow = "slow.site.test"  // times out
	HostOut  = "out.other.test"  // out of scope
	// Login walls (reached only when seeded: nothing links to them).
	HostWall    = "wall.site.test"    // every page redirects to /login
	HostMembers = "members.site.test" // every page is a login form
	HostPortal  = "portal.site.test"  // public, with one walled page and its /login page
)

// UserAgent is the user agent the tests crawl with (product token
// farro-test, which f.site.test's robots.txt shuts out).
const UserAgent = "farro-test/1.0 (+https://github.com/farro-dev/farro)"

// CrawlDelayB is b.site.test's Crawl-delay.
const CrawlDelayB = 300 * time.Millisecond

// RetryAfterC is the Retry-After of c.site.test/limited.
const RetryAfterC = time.Second

// Model returns the site's pages for a server on port, without serving
// them (Expected works on it: for a site served by another process).
func Model(o Options, port int) *Site {
	if o.Fanout <= 0 {
		o.Fanout = 5
	}
	if o.Levels <= 0 {
		o.Levels = 4
	}
	if o.SlowDelay <= 0 {
		o.SlowDelay = 250 * time.Millisecond
	}
	if o.TooSlowDelay <= 0 {
		o.TooSlowDelay = 3 * time.Second
	}
	if o.BigBytes <= 0 {
		o.BigBytes = 3 << 20
	}
	return &Site{Opts: o, Port: port, hits: map[string]int{}}
}

// Start serves a site on 127.0.0.1 (a random port).
func Start(o Options) *Site { return Serve(o, "127.0.0.1:0") }

// Serve serves a site on addr.
func Serve(o Options, addr string) *Site {
	s := Model(o, 0)
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if addr != "127.0.0.1:0" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			panic(fmt.Sprintf("testsite: listen %s: %v", addr, err))
		}
		s.Server.Listener.Close()
		s.Server.Listener = l
	}
	s.Server.Listener = &stampListener{Listener: s.Server.Listener}
	s.Server.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if sc, ok := c.(*stampConn); ok {
			return context.WithValue(ctx, connKey{}, sc)
		}
		return ctx
	}
	_, port, _ := net.SplitHostPort(s.Server.Listener.Addr().String())
	s.Port, _ = strconv.Atoi(port) // before Start: handlers read it
	s.Server.Start()
	return s
}

// SetOnRequest installs fn, called with every access-log record (to
// write a log file).
func (s *Site) SetOnRequest(fn func(Request)) {
	s.mu.Lock()
	s.onRequest = fn
	s.mu.Unlock()
}

// Close stops the server.
func (s *Site) Close() { s.Server.Close() }

// Hosts lists every host name the site answers to.
func (s *Site) Hosts() []string {
	h := []string{HostA, HostWWWA, HostB, HostC, HostD, HostE, HostF, HostSlow, HostOut, HostWall, HostMembers, HostPortal, HostImg}
	if s.Opts.Plain {
		h = []string{HostA, HostB, HostC}
	}
	for i := 1; i <= s.Opts.ExtraHosts; i++ {
		h = append(h, fmt.Sprintf("t%d.site.test", i))
	}
	return h
}

// Resolve returns the --resolve entries mapping every host to 127.0.0.1.
func (s *Site) Resolve() []string {
	var out []string
	for _, h := range s.Hosts() {
		out = append(out, fmt.Sprintf("%s:%d:127.0.0.1", h, s.Port))
	}
	return out
}

// URL returns http://host:port + path.
func (s *Site) URL(host, path string) string {
	return fmt.Sprintf("http://%s:%d%s", host, s.Port, path)
}

// Log returns a copy of the access log, in arrival order.
func (s *Site) Log() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]Request(nil), s.log...)
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	return w.ResponseWriter.Write(b)
}

// stampListener records when each request arrives on a connection: the
// kernel's receive timestamp of its first bytes (SO_TIMESTAMPNS, which TCP
// sockets support since Linux 4.13), so that the access log's arrival
// times do not depend on when the server's goroutines get a CPU. Where the
// kernel gives no timestamp, the time the first bytes were read is used.
type stampListener struct{ net.Listener }

func (l *stampListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &stampConn{Conn: c, armed: true}
	if tc, ok := c.(*net.TCPConn); ok {
		if raw, err := tc.SyscallConn(); err == nil {
			var serr error
			_ = raw.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
			})
			if serr == nil {
				sc.raw = raw
			}
		}
	}
	return sc, nil
}

type connKey struct{}

type stampConn struct {
	net.Conn
	raw     syscall.RawConn
	mu      sync.Mutex
	armed   bool
	arrived time.Time
	taken   time.Time
}

func (c *stampConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	armed := c.armed
	c.mu.Unlock()
	if !armed || c.raw == nil || len(b) == 0 {
		n, err := c.Conn.Read(b)
		if n > 0 && armed {
			c.stamp(time.Now())
		}
		return n, err
	}
	var n, oobn int
	var rerr error
	oob := make([]byte, 256)
	err := c.raw.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), b, oob, 0)
		return rerr != syscall.EAGAIN
	})
	if err != nil {
		return 0, err
	}
	if rerr != nil {
		return 0, rerr
	}
	if n == 0 {
		return 0, io.EOF
	}
	at := time.Now()
	if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SO_TIMESTAMPNS && len(m.Data) >= 16 {
				sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
				nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
				at = time.Unix(sec, nsec)
			}
		}
	}
	c.stamp(at)
	return n, nil
}

func (c *stampConn) stamp(at time.Time) {
	c.mu.Lock()
	if c.armed {
		c.arrived, c.armed = at, false
	}
	c.mu.Unlock()
}

// take returns the arrival of the current request and arms the
// connection for the next one.
func (c *stampConn) take() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.arrived.After(c.taken) {
		return time.Time{} // stale: not this request's
	}
	c.taken = c.arrived
	return c.arrived
}

func (c *stampConn) rearm() {
	c.mu.Lock()
	c.armed = true
	c.mu.Unlock()
}

func (s *Site) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	entry := start
	sc, _ := r.Context().Value(connKey{}).(*stampConn)
	if sc != nil {
		if t := sc.take(); !t.IsZero() && t.Before(start) {
			start = t
		}
		defer sc.rearm()
	}
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	uri := r.URL.RequestURI()
	s.mu.Lock()
	hit := s.hits[host+uri]
	s.hits[host+uri]++
	s.mu.Unlock()
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		end := time.Now()
		rec := Request{Host: host, URI: uri, UA: r.UserAgent(), Start: start, Entry: entry, End: end, Status: sw.status}
		s.mu.Lock()
		s.log = append(s.log, rec)
		if s.onRequest != nil {
			s.onRequest(rec)
		}
		s.mu.Unlock()
	}()
	resp := s.Page(host, uri, hit)
	if resp.Delay > 0 {
		t := time.NewTimer(resp.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			sw.status = 499
			return
		}
	}
	for k, v := range resp.Header {
		sw.Header()[k] = v
	}
	body := resp.Body
	if resp.Gzip && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = b.Bytes()
		sw.Header().Set("Content-Encoding", "gzip")
	}
	sw.Header().Set("Content-Length", strconv.Itoa(len(body)))
	sw.WriteHeader(resp.Status)
	_, _ = sw.Write(body)
}
