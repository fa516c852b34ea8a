// Package livesite is a loopback web site whose pages a test edits
// between pipeline runs: several host names on one listener, pages with
// links, and one of three validator modes per host (ETag, Last-Modified,
// or none: hash-only), with a log of every request.
package livesite

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"
)

// Mode is how a host validates.
type Mode int

// Validator modes.
const (
	ETag         Mode = iota // strong ETag, If-None-Match honoured
	LastModified             // Last-Modified, If-Modified-Since honoured
	HashOnly                 // no validators: the client must hash
)

// Request is one logged request.
type Request struct {
	Host, Path      string
	Status          int
	IfNoneMatch     string
	IfModifiedSince string
	At              time.Time
}

type page struct {
	body     string
	modified time.Time
	status   int
}

// Site is the site.
type Site struct {
	srv   *httptest.Server
	mu    sync.Mutex
	modes map[string]Mode
	pages map[string]*page // host+path
	log   []Request
	// robots: a host's robots.txt (default: allow all).
	robots map[string]string
	// base of the Last-Modified times: each edit moves a page one
	// second later, so that HTTP dates (second precision) differ.
	clock time.Time
}

// Start serves the site on 127.0.0.1.
func Start() *Site {
	s := &Site{modes: map[string]Mode{}, pages: map[string]*page{}, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close stops the server.
func (s *Site) Close() { s.srv.Close() }

// Port is the listener's port.
func (s *Site) Port() string {
	_, p, _ := net.SplitHostPort(s.srv.Listener.Addr().String())
	return p
}

// URL is http://host:port/path.
func (s *Site) URL(host, path string) string { return "http://" + host + ":" + s.Port() + path }

// Resolve is the --resolve entry of host.
func (s *Site) Resolve(host string) string { return host + ":" + s.Port() + ":127.0.0.1" }

// SetMode sets host's validator mode.
func (s *Site) SetMode(host string, m Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.modes[host] = m
}

// SetRobots serves body as host's robots.txt.
func (s *Site) SetRobots(host, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.robots == nil {
		s.robots = map[string]string{}
	}
	s.robots[host] = body
}

// Set creates or edits a page (status 200).
func (s *Site) Set(host, path, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = s.clock.Add(time.Second)
	s.pages[host+path] = &page{body: body, modified: s.clock, status: 200}
}

// Fail makes a page answer status (0: back to 200).
func (s *Site) Fail(host, path string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pages[host+path]; p != nil {
		p.status = status
		if status == 0 {
			p.status = 200
		}
	}
}

// Page is an HTML page linking to links (paths).
func Page(title string, links ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<html><head><title>%s</title></head><body><h1>%s</h1>\n", title, title)
	for _, l := range links {
		fmt.Fprintf(&b, "<a href=\"%s\">%s</a>\n", l, l)
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

// Log returns the requests so far.
func (s *Site) Log() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// Count counts the logged requests of host (any host if "") with a
// status (any if 0) and path (any if "").
func (s *Site) Count(host, path string, status int) int {
	n := 0
	for _, r := range s.Log() {
		if (host == "" || r.Host == host) && (path == "" || r.Path == path) && (status == 0 || r.Status == status) {
			n++
		}
	}
	return n
}

// Paths lists the distinct paths requested on host.
func (s *Site) Paths(host string) []string {
	seen := map[string]bool{}
	for _, r := range s.Log() {
		if r.Host == host {
			seen[r.Path] = true
		}
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func etagOf(body string) string {
	h := sha256.Sum256([]byte(body))
	return `"` + hex.EncodeToString(h[:8]) + `"`
}

func (s *Site) serve(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	req := Request{Host: host, Path: r.URL.Path, IfNoneMatch: r.Header.Get("If-None-Match"), IfModifiedSince: r.Header.Get("If-Modified-Since"), At: time.Now()}
	status := s.respond(w, r, host, &req)
	req.Status = status
	s.log = append(s.log, req)
}

func (s *Site) respond(w http.ResponseWriter, r *http.Request, host string, req *Request) int {
	if r.URL.Path == "/robots.txt" {
		body, ok := s.robots[host]
		if !ok {
			body = "User-agent: *\nAllow: /\n"
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(body))
		return 200
	}
	p := s.pages[host+r.URL.Path]
	if p == nil {
		http.NotFound(w, r)
		return 404
	}
	if p.status != 200 {
		w.WriteHeader(p.status)
		return p.status
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	switch s.modes[host] {
	case ETag:
		tag := etagOf(p.body)
		w.Header().Set("ETag", tag)
		if req.IfNoneMatch == tag {
			w.WriteHeader(http.StatusNotModified)
			return 304
		}
	case LastModified:
		w.Header().Set("Last-Modified", p.modified.Format(http.TimeFormat))
		if t, err := http.ParseTime(req.IfModifiedSince); err == nil && !p.modified.After(t) {
			w.WriteHeader(http.StatusNotModified)
			return 304
		}
	}
	_, _ = w.Write([]byte(p.body))
	return 200
}
