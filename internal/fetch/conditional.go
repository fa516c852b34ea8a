package fetch

import (
	"context"
	"fmt"
	"github.com/farro-dev/farro/internal/politeness"
	"net/http"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
)

// Conditional requests (docs/PIPELINE.md): a refresh round re-fetches a
// known URL with the validators of its last response (If-None-Match,
// If-Modified-Since); a 304 is recorded as unchanged and stores nothing,
// and a 200 whose body hashes like the last one is unchanged too (its
// body is content-addressed, so it is not stored twice either). The
// source.check handler uses Get for the same kind of request.

type conditionalKey struct{}

// conditional holds the validators sent with a request.
type conditional struct {
	ifNoneMatch, ifModifiedSince string
}

// conditionalContext prepares the conditional request of a crawl.fetch
// prompt: the validators travel to do() in the context.
func conditionalContext(ctx context.Context, p *crawl.FetchPrompt, art *crawl.Artifact) context.Context {
	art.Round = p.Round
	if p.IfNoneMatch == "" && p.IfModifiedSince == "" {
		return ctx
	}
	return context.WithValue(ctx, conditionalKey{}, conditional{p.IfNoneMatch, p.IfModifiedSince})
}

// setConditional adds the context's validators to req.
func setConditional(ctx context.Context, req *http.Request) {
	c, ok := ctx.Value(conditionalKey{}).(conditional)
	if !ok {
		return
	}
	if c.ifNoneMatch != "" {
		req.Header.Set("If-None-Match", c.ifNoneMatch)
	}
	if c.ifModifiedSince != "" {
		req.Header.Set("If-Modified-Since", c.ifModifiedSince)
	}
}

// notModified completes art for a 304 answer to a conditional request:
// unchanged, the previous body's hash, the validators kept (a 304 need not
// repeat them), no body stored, no links (the page's links are those of
// the previous round, all known already). It returns false for any other
// response.
func notModified(p *crawl.FetchPrompt, art *crawl.Artifact) bool {
	if art.HTTPStatus != http.StatusNotModified || (p.IfNoneMatch == "" && p.IfModifiedSince == "") {
		return false
	}
	art.Unchanged, art.SHA256, art.BodyBytes = true, p.PrevSHA256, 0
	if art.Headers == nil {
		art.Headers = map[string]string{}
	}
	if art.Headers["ETag"] == "" && p.IfNoneMatch != "" {
		art.Headers["ETag"] = p.IfNoneMatch
	}
	if art.Headers["Last-Modified"] == "" && p.IfModifiedSince != "" {
		art.Headers["Last-Modified"] = p.IfModifiedSince
	}
	return true
}

// GetRequest is one GET made outside a crawl (source.check): the same
// client as the crawl's (SSRF guard, --resolve, no redirects followed, no
// proxy), with optional validators.
type GetRequest struct {
	URL             string
	UserAgent       string
	Resolve         map[string]string
	AllowPrivate    bool
	ConnectTimeout  time.Duration
	Timeout         time.Duration
	MaxBytes        int64
	IfNoneMatch     string
	IfModifiedSince string
	// Turn: the request's turn at its domain's politeness gate (taken
	// with Handler.Gates.Wait), told when the request is written and done
	// when Get returns. Nil: no gate.
	Turn *politeness.Turn
}

// GetResponse is its answer. ErrorCode classifies a failed request as the
// crawl's artifacts do (dns_failure, connect_failure, timeout,
// network_failure, private_address).
type GetResponse struct {
	Status    int
	Headers   map[string]string // the selected headers, as in artifacts
	Body      []byte
	Truncated bool
	Start     time.Time // when the request was written (or attempted)
	Duration  time.Duration
	ErrorCode string
}

// Get sends one GET (conditional when validators are given) with h's
// clients and reads at most MaxBytes of the body.
func (h *Handler) Get(ctx context.Context, r GetRequest) (GetResponse, error) {
	if r.IfNoneMatch != "" || r.IfModifiedSince != "" {
		ctx = context.WithValue(ctx, conditionalKey{}, conditional{r.IfNoneMatch, r.IfModifiedSince})
	}
	res, err := h.do(ctx, r.Turn, r.URL, r.UserAgent, r.Resolve, r.AllowPrivate, r.ConnectTimeout.Milliseconds(), r.Timeout.Milliseconds(), r.MaxBytes)
	out := GetResponse{Status: res.status, Headers: res.headers, Body: res.body, Truncated: res.truncated, Start: res.start, Duration: res.dur}
	if err != nil {
		out.ErrorCode = classify(err)
		return out, fmt.Errorf("GET %s: %s: %w", r.URL, out.ErrorCode, err)
	}
	return out, nil
}
