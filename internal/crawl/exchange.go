package crawl

// Exchange is the HTTP exchange of a fetch as it went over the wire, kept
// in the artifact so that `farroctl crawl export --warc` can write WARC
// request and response records from the spool (docs/CRAWL.md, "WARC").
// It is bounded: header lines beyond MaxExchangeHeaderBytes are dropped
// and HeadersTruncated says so.
type Exchange struct {
	// RequestLine is "GET /path?query HTTP/1.1".
	RequestLine string `json:"request_line"`
	// RequestHeaders are the request's header lines ("Name: value") in
	// the order they were written, Host and Accept-Encoding included.
	RequestHeaders []string `json:"request_headers"`
	// StatusLine is the response's "HTTP/1.1 200 OK".
	StatusLine string `json:"status_line"`
	// ResponseHeaders are the response's header lines, sorted by name.
	// When the transport decoded a gzip body (DecodedEncoding "gzip") it
	// removed Content-Encoding and Content-Length, so the lines describe
	// the stored, decoded body.
	ResponseHeaders  []string `json:"response_headers"`
	DecodedEncoding  string   `json:"decoded_encoding,omitempty"`
	HeadersTruncated bool     `json:"headers_truncated,omitempty"`
}

// MaxExchangeHeaderBytes caps each side's header lines in an Exchange.
const MaxExchangeHeaderBytes = 32 << 10

// AddHeaderLine appends "name: value" to *lines unless that would take
// *size past MaxExchangeHeaderBytes (then *truncated is set). CR and LF
// in the value are replaced by spaces.
func AddHeaderLine(lines *[]string, size *int, truncated *bool, name, value string) {
	line := name + ": " + value
	b := []byte(line)
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	if *size+len(b)+2 > MaxExchangeHeaderBytes {
		*truncated = true
		return
	}
	*size += len(b) + 2
	*lines = append(*lines, string(b))
}
