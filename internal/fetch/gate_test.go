package fetch

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/politeness"
	"github.com/farro-dev/farro/pkg/job"
)

// When net/http retries a GET on a new connection (the reused one was
// closed by the server after the request was written), the retry is a
// second request on the wire: it waits at the domain's gate like any
// other. The server closes the kept-alive connection on its second
// request; the arrival times are read by the server as the bytes come.
func TestTransparentRetryWaitsAtGate(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var arrivals []time.Time
	go func() {
		for first := true; ; first = false {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn, first bool) {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					mu.Lock()
					arrivals = append(arrivals, time.Now())
					mu.Unlock()
					if first && n == 1 {
						return // the reused connection dies under the request
					}
					_ = req.Body.Close()
					fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}(c, first)
		}
	}()
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := NewHandler(s, nil)
	const interval = 200 * time.Millisecond
	url := "http://" + ln.Addr().String() + "/"
	for i := 0; i < 2; i++ {
		tn, err := h.Gates.Wait(context.Background(), "r.test", politeness.Ask{Interval: interval, MaxInFlight: 1})
		if err != nil {
			t.Fatal(err)
		}
		res, err := h.Get(context.Background(), GetRequest{URL: url, UserAgent: "farro-test/1.0", AllowPrivate: true,
			ConnectTimeout: time.Second, Timeout: 5 * time.Second, MaxBytes: 1 << 10, Turn: tn})
		if err != nil || res.Status != 200 {
			t.Fatalf("GET %d: %d %v", i, res.Status, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 3 {
		t.Fatalf("%d requests arrived, want 3 (two GETs, one retried by net/http)", len(arrivals))
	}
	for i := 1; i < 3; i++ {
		// Arrival stamps are taken after a read wakes up, which a loaded
		// machine delays (by 5.5 ms in one CI run): 20 ms of slack. A
		// retry that skips the gate arrives within a millisecond.
		if d := arrivals[i].Sub(arrivals[i-1]); d < interval-20*time.Millisecond {
			t.Errorf("requests %d and %d arrived %s apart, want at least %s", i-1, i, d, interval)
		}
	}
}

// A robots.txt redirected to another site is a request to that site: the
// hop waits at that site's gate (held here by another party's request).
func TestRobotsRedirectHopWaitsAtItsDomainsGate(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var hopAt time.Time
	mux := http.NewServeMux()
	var port string
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		switch host {
		case "from.test":
			http.Redirect(w, r, "http://to.test:"+port+"/robots.txt", http.StatusMovedPermanently)
		default:
			mu.Lock()
			hopAt = time.Now()
			mu.Unlock()
			fmt.Fprint(w, "User-agent: *\nDisallow: /x\n")
		}
	})
	hs := newHarness(t, mux)
	port = hs.port
	const interval = 300 * time.Millisecond
	tn, err := hs.h.Gates.Wait(context.Background(), "to.test:"+port, politeness.Ask{Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	tn.Sent(sent)
	tn.Done()
	p := crawl.RobotsPrompt{Crawl: "t", Origin: "http://from.test:" + port, Domain: "from.test:" + port, UserAgent: "farro-test/1.0",
		TimeoutMS: 2000, ConnectTimeoutMS: 1000, AllowPrivate: true,
		Resolve: map[string]string{"from.test:" + port: "127.0.0.1", "to.test:" + port: "127.0.0.1"}}
	b, _ := json.Marshal(p)
	dir := t.TempDir()
	rh := &RobotsHandler{Handler: hs.h}
	if res := rh.Run(context.Background(), agent.Task{Env: job.Envelope{Prompt: b, Lifecycle: &job.Job{ID: "r-t-0000000000000000-0"}, Runtime: job.Runtime{Dir: dir}}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	var a crawl.RobotsArtifact
	if err := crawl.ReadResult(dir, &a); err != nil || a.Verdict != crawl.RobotsRules || a.Redirects != 1 {
		t.Fatalf("robots.txt via a redirect: %+v %v", a, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if d := hopAt.Sub(sent); d < interval {
		t.Errorf("the redirect hop reached to.test %s after another request to it, want at least %s", d, interval)
	}
}
