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

	"github.com/farro-dev/farro/internal/tally"
)

// CheckAddr accepts a host:port to listen on for metrics (tally.CheckAddr:
// loopback only unless allowRemote).
func CheckAddr(addr string, allowRemote bool) error { return tally.CheckAddr(addr, allowRemote) }

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
