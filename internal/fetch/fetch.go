// Package fetch is agentd's crawl handlers: crawl.fetch fetches one URL
// and crawl.robots one origin's robots.txt, and both leave an artifact
// (result.json) in the job directory for the frontier.
//
// A fetch never follows redirects (a 3xx is the URL's artifact and its
// Location goes back to the frontier), waits at the domain's politeness
// gate (internal/politeness, shared by every crawl and source check of the
// spool) so that no two requests to a domain are closer than the interval
// either asked, caps
// the body, decompresses gzip, stores the body content-addressed under the
// crawl's bodies/, and extracts the links of HTML pages. Any HTTP response,
// 404 and 500 included, makes the job succeed; only a network failure
// (http_status 0) makes it fail, so that managerd's policy retries it.
// Refusals (a private address without allow_private, a URL robots.txt
// disallows) succeed with outcome "refused": retrying would not help.
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/politeness"
	"github.com/farro-dev/farro/internal/urlnorm"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// selectedHeaders are kept in the artifact.
var selectedHeaders = []string{
	"Content-Type", "Content-Length", "Content-Encoding", "Content-Language", "Last-Modified", "ETag",
	"Location", "Retry-After", "Cache-Control", "Expires", "Date", "Server", "X-Robots-Tag", "Link",
}

// Handler runs crawl.fetch jobs.
type Handler struct {
	Spool   *job.Spool
	Clients *Clients
	// Gates: the spool's politeness gates, one per domain, shared by
	// every crawl and source check (gate.go).
	Gates  *politeness.Gates
	robots robotsCache
}

// NewHandler returns a fetch handler for spool s.
func NewHandler(s *job.Spool, clients *Clients) *Handler {
	if clients == nil {
		clients = NewClients()
	}
	return &Handler{Spool: s, Clients: clients, Gates: politeness.At(s.Path(politeness.Dir))}
}

// Run implements agent.Handler.
func (h *Handler) Run(ctx context.Context, t agent.Task) agent.Result {
	var p crawl.FetchPrompt
	if err := json.Unmarshal(t.Env.Prompt, &p); err != nil {
		return agent.Result{Err: fmt.Errorf("crawl.fetch prompt: %w", err)}
	}
	st, err := crawl.Open(h.Spool, p.Crawl)
	if err != nil {
		return agent.Result{Err: fmt.Errorf("crawl.fetch prompt: %w", err)}
	}
	art := &crawl.Artifact{
		Kind: crawl.KindFetch, Crawl: p.Crawl, JobID: t.Env.Lifecycle.ID, NormalizedURL: p.URL, FinalURL: p.URL,
		Domain: p.Domain, Depth: p.Depth, Hops: p.Hops, Attempt: t.Env.Lifecycle.Attempts, Links: []string{},
	}
	var body *fsq.Staged
	err = h.fetch(ctx, st, &p, art, &body)
	count(art) // farro_crawl_* metrics (metrics.go)
	if werr := h.store(t, art, body); werr != nil {
		return agent.Result{Err: werr}
	}
	return agent.Result{Err: err}
}

// store puts the body (if any) and result.json in place with one shared
// barrier (job.Spool.Sync) instead of an fsync of each file and
// directory: both are staged, the barrier makes them durable, then each
// is renamed into place. The agent's commit makes the renames durable
// before the job is seen to have succeeded.
func (h *Handler) store(t agent.Task, art *crawl.Artifact, body *fsq.Staged) error {
	if body != nil {
		defer body.Discard()
	}
	res, err := crawl.StageResult(t.Env.Runtime.Dir, art)
	if err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	defer res.Discard()
	if err := h.Spool.Sync(); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	// A claim superseded while it fetched (its agent was frozen past the
	// crash threshold) puts nothing in place: the directory may be a
	// newer claim's.
	if err := t.Fenced(); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	if body != nil {
		if err := body.Replace(); err != nil {
			return fmt.Errorf("store body: %w", err)
		}
	}
	if err := res.Replace(); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

// fetch fills art; it returns an error only for what must be retried (a
// network failure, or the job being stopped).
func (h *Handler) fetch(ctx context.Context, st *crawl.Store, p *crawl.FetchPrompt, art *crawl.Artifact, body **fsq.Staged) error {
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		art.Outcome, art.ErrorCode, art.Error = crawl.OutcomeRefused, crawl.ErrCodeBadURL, fmt.Sprintf("not a fetchable URL: %q", p.URL)
		art.FetchedAt = time.Now().UTC()
		return nil
	}
	if p.Robots != nil {
		ok, rule, err := h.robots.allowed(st, p.Robots, p.UserAgent, u.RequestURI())
		if err != nil {
			// The stored robots.txt is missing: do not fetch blind, let
			// the frontier fetch robots.txt again.
			art.Outcome, art.ErrorCode, art.Error = crawl.OutcomeRefused, crawl.ErrCodeRobots, "robots.txt unavailable to the fetcher: "+err.Error()
			art.FetchedAt = time.Now().UTC()
			return nil
		}
		if !ok {
			art.Outcome, art.ErrorCode, art.Error = crawl.OutcomeRefused, crawl.ErrCodeRobots, "disallowed by robots.txt: "+rule
			art.FetchedAt = time.Now().UTC()
			return nil
		}
	}
	interval := time.Duration(p.MinIntervalMS) * time.Millisecond
	tk, err := h.wait(ctx, p.Domain, interval, p.MaxInFlightPerDomain)
	if err != nil {
		art.Outcome, art.ErrorCode, art.Error = crawl.OutcomeNetworkError, crawl.ErrCodeNetwork, "not sent: "+err.Error()
		art.FetchedAt = time.Now().UTC()
		return err
	}
	ctx = conditionalContext(ctx, p, art) // a refresh's validators (conditional.go)
	ctx = filterContext(ctx, p)           // content types (directives.go)
	res, err := h.do(ctx, tk, p.URL, p.UserAgent, p.Resolve, p.AllowPrivate, p.ConnectTimeoutMS, p.TimeoutMS, p.MaxBodyBytes)
	art.FetchedAt, art.DurationMS = res.start.UTC(), res.dur.Milliseconds()
	if err != nil {
		code := classify(err)
		art.ErrorCode, art.Error = code, err.Error()
		if code == crawl.ErrCodePrivate {
			art.Outcome = crawl.OutcomeRefused
			return nil
		}
		art.Outcome = crawl.OutcomeNetworkError
		return fmt.Errorf("fetch %s: %s: %w", p.URL, code, err)
	}
	art.Outcome, art.HTTPStatus = crawl.OutcomeFetched, res.status
	art.Headers, art.ContentType = res.headers, res.headers["Content-Type"]
	// The exchange as sent and received, for WARC export (exchange.go).
	art.Exchange = res.exchange
	if notModified(p, art) { // 304 to a conditional request (conditional.go)
		return nil
	}
	if res.rejectedType { // body not read (directives.go)
		rejectType(p, art)
		return nil
	}
	art.BodyBytes, art.Truncated = int64(len(res.body)), res.truncated
	if res.truncated {
		art.ErrorCode, art.Error = crawl.ErrCodeTooLarge, fmt.Sprintf("body truncated at %d bytes", p.MaxBodyBytes)
	}
	sum := sha256.Sum256(res.body)
	art.SHA256 = hex.EncodeToString(sum[:])
	art.Unchanged = p.PrevSHA256 != "" && art.SHA256 == p.PrevSHA256
	staged, err := st.StageBody(art.SHA256, res.body)
	if err != nil {
		return fmt.Errorf("store body: %w", err)
	}
	*body = staged // put in place by store, after its barrier
	if res.status >= 300 && res.status < 400 {
		if loc := res.headers["Location"]; loc != "" {
			if r, err := urlnorm.Resolve(p.URL, loc, urlnorm.Options{}); err == nil {
				art.RedirectTo = r
			}
		}
	}
	if res.status == http.StatusTooManyRequests || res.status == http.StatusServiceUnavailable {
		if d, ok := ParseRetryAfter(res.headers["Retry-After"], time.Now()); ok {
			art.RetryAfter = d.Seconds()
			// Hold back the fetches of this domain already released.
			_ = h.Gates.HoldUntil(p.Domain, time.Now().Add(min(d, politeness.MaxHold)))
		}
	}
	pageLinks(p, art, &res)  // links, robots meta, nofollow (directives.go)
	pageImages(p, art, &res) // images, stylesheets, scripts (images.go)
	markLoginWall(p, art, &res)
	return nil
}

type response struct {
	start     time.Time
	dur       time.Duration
	status    int
	headers   map[string]string
	body      []byte
	truncated bool
	exchange  *crawl.Exchange
	// rejectedType: a 2xx of a type not in the prompt's content types,
	// its body not read; robotsTag: the X-Robots-Tag header values.
	rejectedType bool
	robotsTag    []string
}

// do sends one GET and reads at most maxBytes of the body. tk, the
// request's turn at its domain's gate (nil: none to keep), is told when
// the request is written (and waits again if net/http retries it), and is
// done when do returns.
func (h *Handler) do(ctx context.Context, tk *politeness.Turn, rawURL, ua string, resolve map[string]string, allowPrivate bool, connectMS, timeoutMS, maxBytes int64) (res response, err error) {
	defer tk.Done()
	res = response{start: time.Now()}
	connect := time.Duration(connectMS) * time.Millisecond
	if connect <= 0 {
		connect = 10 * time.Second
	}
	timeout := time.Duration(timeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var wrote atomic.Int64
	rec := &exchangeRecorder{}
	arm := gotConn(ctx, tk)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		// The connection tells the turn on its first write of this
		// request (gate.go: sendConn); a retry waits again.
		GotConn:          func(info httptrace.GotConnInfo) { rec.reset(); arm(info.Conn) },
		WroteHeaderField: rec.wrote,
		WroteRequest: func(httptrace.WroteRequestInfo) {
			wrote.CompareAndSwap(0, time.Now().UnixNano())
		},
	})
	// fetched_at is when the request was written, if it was.
	defer func() {
		if w := wrote.Load(); w != 0 {
			res.start = time.Unix(0, w)
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return res, err
	}
	req.Header.Set("User-Agent", ua)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	setConditional(ctx, req) // If-None-Match, If-Modified-Since (conditional.go)
	cl := h.Clients.Get(allowPrivate, resolve, connect)
	resp, err := cl.Do(req)
	if err != nil {
		res.dur = time.Since(res.start)
		return res, err
	}
	defer resp.Body.Close()
	res.status = resp.StatusCode
	res.exchange = rec.exchange(req, resp)
	res.headers = map[string]string{}
	for _, k := range selectedHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			res.headers[k] = strings.Join(v, ", ")
		}
	}
	res.robotsTag = resp.Header.Values("X-Robots-Tag")
	if typeRejected(ctx, resp) {
		res.dur, res.rejectedType = time.Since(res.start), true
		return res, nil
	}
	if maxBytes <= 0 {
		maxBytes = 10 << 20
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	res.dur = time.Since(res.start)
	if err != nil {
		return res, fmt.Errorf("reading body: %w", err)
	}
	if int64(len(body)) > maxBytes {
		body, res.truncated = body[:maxBytes], true
	}
	res.body = body
	return res, nil
}

// ParseRetryAfter reads a Retry-After value: delay seconds or an HTTP date.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, 1<<31)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// robotsCache keeps parsed robots.txt files by body hash.
type robotsCache struct {
	mu sync.Mutex
	m  map[string]*parsedRobots
}
