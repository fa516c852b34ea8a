package fetch

import (
	"compress/gzip"
	"net/http"
	"strings"
	"testing"

	"github.com/farro-dev/farro/internal/crawl"
)

// The artifact keeps the exchange as it went over the wire, for WARC
// export: the request line and the headers written (Host and
// Accept-Encoding included, which the transport adds), the status line
// with its reason phrase, every response header, and whether the
// transport decoded gzip; header lines are capped.
func TestFetchKeepsExchange(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/gz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("X-Two", "a")
		w.Header().Add("X-Two", "b")
		w.WriteHeader(203)
		zw := gzip.NewWriter(w)
		zw.Write([]byte("<p>hi</p>"))
		zw.Close()
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 100; i++ {
			w.Header().Add("X-Filler", strings.Repeat("f", 1000))
		}
		w.Write([]byte("ok"))
	})
	hs := newHarness(t, mux)
	a, err := hs.run(hs.h, hs.prompt("/gz?q=1", nil))
	if err != nil || a.Exchange == nil {
		t.Fatalf("%+v, %v", a, err)
	}
	x := a.Exchange
	if x.RequestLine != "GET /gz?q=1 HTTP/1.1" || x.StatusLine != "HTTP/1.1 203 Non-Authoritative Information" || x.DecodedEncoding != "gzip" {
		t.Errorf("exchange: %+v", x)
	}
	req := strings.Join(x.RequestHeaders, "\n")
	for _, want := range []string{"Host: site.test:" + hs.port, "User-Agent: farro-test/1.0", "Accept-Encoding: gzip"} {
		if !strings.Contains(req, want) {
			t.Errorf("request headers %q lack %q", x.RequestHeaders, want)
		}
	}
	resp := strings.Join(x.ResponseHeaders, "\n")
	if !strings.Contains(resp, "Content-Type: text/html") || !strings.Contains(resp, "X-Two: a\nX-Two: b") || strings.Contains(resp, "Content-Encoding") {
		t.Errorf("response headers (decoded body: no Content-Encoding): %q", x.ResponseHeaders)
	}

	a, err = hs.run(hs.h, hs.prompt("/huge", nil))
	if err != nil || a.Exchange == nil || !a.Exchange.HeadersTruncated {
		t.Fatalf("huge headers: %+v, %v", a, err)
	}
	n := 0
	for _, l := range a.Exchange.ResponseHeaders {
		n += len(l) + 2
	}
	if n > crawl.MaxExchangeHeaderBytes {
		t.Errorf("response headers kept: %d bytes, cap %d", n, crawl.MaxExchangeHeaderBytes)
	}
	// A fetch that got no response keeps no exchange.
	a, _ = hs.run(hs.h, hs.prompt("/gz", func(p *crawl.FetchPrompt) { p.AllowPrivate = false }))
	if a.Exchange != nil {
		t.Errorf("refused fetch with an exchange: %+v", a.Exchange)
	}
}
