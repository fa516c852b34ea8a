package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// CheckAddr accepts a host:port to listen on for metrics. Unless
// allowRemote, the host must be loopback: a literal loopback address
// (127.0.0.0/8, ::1) or a name that resolves only to loopback addresses
// ("localhost"). An empty host (":9641") means every interface and is
// refused too. The metrics say what runs and how much: they are not for
// the network at large without a decision to expose them.
func CheckAddr(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr %q: %v (want host:port, e.g. 127.0.0.1:9641)", addr, err)
	}
	if port == "" {
		return fmt.Errorf("--metrics-addr %q: no port", addr)
	}
	if allowRemote {
		return nil
	}
	if host == "" {
		return fmt.Errorf("--metrics-addr %q listens on every interface; use a loopback address such as 127.0.0.1:%s, or add --metrics-allow-remote", addr, port)
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else if ips, err = net.LookupIP(host); err != nil {
		return fmt.Errorf("--metrics-addr %q: %v", addr, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("--metrics-addr %q is not a loopback address (%s); use 127.0.0.1 or ::1, or add --metrics-allow-remote", addr, ip)
		}
	}
	return nil
}

// Server is a running metrics endpoint.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	err  chan error
	once sync.Once
	cerr error
}

// Serve checks addr (CheckAddr), binds it at once (so that a busy port is
// a startup error) and serves g on /metrics in the background, with a
// short index on /.
func Serve(addr string, allowRemote bool, g prometheus.Gatherer) (*Server, error) {
	if err := CheckAddr(addr, allowRemote); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "farro metrics: GET /metrics (Prometheus text format)")
	})
	s := &Server{ln: ln, err: make(chan error, 1), srv: &http.Server{
		Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
	}}
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.err <- err
	}()
	return s, nil
}

// Addr is the address actually listened on (useful with port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the endpoint, letting scrapes in progress finish for up to
// a second.
func (s *Server) Close() error {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := s.srv.Shutdown(ctx)
		if serr := <-s.err; err == nil {
			err = serr
		}
		s.cerr = err
	})
	return s.cerr
}
