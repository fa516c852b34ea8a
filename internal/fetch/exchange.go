package fetch

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/farro-dev/farro/internal/crawl"
)

// exchangeRecorder keeps the request header lines as the transport writes
// them (httptrace's WroteHeaderField: Host, User-Agent, Accept-Encoding
// and the rest, in wire order), for the artifact's Exchange (WARC export).
// The transport writes from its own goroutine, hence the mutex.
type exchangeRecorder struct {
	mu        sync.Mutex
	lines     []string
	size      int
	truncated bool
}

// reset forgets the lines of an attempt the transport retried on a new
// connection.
func (r *exchangeRecorder) reset() {
	r.mu.Lock()
	r.lines, r.size, r.truncated = nil, 0, false
	r.mu.Unlock()
}

func (r *exchangeRecorder) wrote(key string, values []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.HasPrefix(key, ":") { // HTTP/2 pseudo-headers
		if key != ":authority" {
			return
		}
		key = "Host"
	}
	for _, v := range values {
		crawl.AddHeaderLine(&r.lines, &r.size, &r.truncated, key, v)
	}
}

// exchange is the Exchange of req answered by resp.
func (r *exchangeRecorder) exchange(req *http.Request, resp *http.Response) *crawl.Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := &crawl.Exchange{
		RequestLine:    req.Method + " " + req.URL.RequestURI() + " " + resp.Proto,
		RequestHeaders: append([]string(nil), r.lines...),
		StatusLine:     resp.Proto + " " + strings.TrimSpace(resp.Status),
	}
	if strings.TrimSpace(resp.Status) == strconv.Itoa(resp.StatusCode) { // no reason phrase sent
		x.StatusLine += " " + http.StatusText(resp.StatusCode)
	}
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	size, trunc := 0, false
	for _, k := range keys {
		for _, v := range resp.Header[k] {
			crawl.AddHeaderLine(&x.ResponseHeaders, &size, &trunc, k, v)
		}
	}
	x.HeadersTruncated = r.truncated || trunc
	if resp.Uncompressed {
		x.DecodedEncoding = "gzip"
	}
	return x
}
