package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/fetch"
	"github.com/farro-dev/farro/internal/politeness"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/pkg/job"
)

// KindCheck is the job kind of a source check.
const KindCheck = "source.check"

// Actor is the name the pipeline acts under in events and requests.
const Actor = "pipeline"

// CheckPrompt is the prompt.json of a source.check job. The handler reads
// everything else from the source file, the truth at run time.
type CheckPrompt struct {
	Source string `json:"source"`
	// Due is the source's DueStamp when the run planned the check: a
	// source whose stamp moved on was checked already (by an earlier
	// attempt of this job that died before committing), and is not
	// checked again.
	Due string `json:"due"`
	// Acquire: after a first or changed outcome, start or refresh the
	// source's crawl right away (pipeline run); without it the source is
	// left acquire_pending (pipeline check).
	Acquire bool `json:"acquire"`
	// MinIntervalMS spaces the requests to the domain at request time,
	// whoever makes them (internal/politeness).
	MinIntervalMS int64 `json:"min_interval_ms,omitempty"`
	// Budget: the acquisition's share of the run's requests (budget.go).
	Budget RunBudget `json:"budget,omitempty"`
}

// CheckResult is the result.json a source.check job leaves.
type CheckResult struct {
	Kind           string         `json:"kind"` // source.check
	Source         string         `json:"source"`
	URL            string         `json:"url,omitempty"`
	Outcome        source.Outcome `json:"outcome,omitempty"` // "" when skipped
	Skipped        string         `json:"skipped,omitempty"` // why no check was made
	HTTPStatus     int            `json:"http_status"`
	Conditional    bool           `json:"conditional"` // validators were sent
	ContentHash    string         `json:"content_hash,omitempty"`
	BodyBytes      int            `json:"body_bytes"`
	CheckedAt      time.Time      `json:"checked_at"`
	DurationMS     int64          `json:"duration_ms"`
	NextCheckAfter *time.Time     `json:"next_check_after,omitempty"`
	Failures       int            `json:"consecutive_failures"`
	Error          string         `json:"error,omitempty"`
	ErrorCode      string         `json:"error_code,omitempty"`
	Acquire        *AcquireResult `json:"acquire,omitempty"`
	// Registry is what the check's outcome changed in the domain
	// registry ("blocked/forbidden", ...; registry.go), RegistryError
	// why it could not be written there.
	Registry      string `json:"registry,omitempty"`
	RegistryError string `json:"registry_error,omitempty"`
}

// MaxCheckBytes caps the body a check reads (and hashes).
const MaxCheckBytes = 10 << 20

// CheckHandler runs source.check jobs in agentd.
type CheckHandler struct {
	Spool *job.Spool
	Fetch *fetch.Handler // its HTTP clients: SSRF guard, --resolve, no redirects
	// Rand returns [0, n) for the jitter; nil: math/rand/v2.
	Rand func(n int64) int64
	// Now; nil: time.Now.
	Now func() time.Time
}

// NewCheckHandler returns the source.check handler, sharing fetcher's
// clients.
func NewCheckHandler(s *job.Spool, fetcher *fetch.Handler) *CheckHandler {
	if fetcher == nil {
		fetcher = fetch.NewHandler(s, nil)
	}
	return &CheckHandler{Spool: s, Fetch: fetcher}
}

func (h *CheckHandler) now() time.Time {
	if h.Now != nil {
		return h.Now().UTC()
	}
	return time.Now().UTC()
}

func (h *CheckHandler) rnd(n int64) int64 {
	if h.Rand != nil {
		return h.Rand(n)
	}
	return rand.Int64N(n)
}

// Run implements agent.Handler. A check that reaches the source (any
// outcome, failed included: the source's own backoff is the retry
// policy) succeeds; the job fails only when the source file cannot be
// read or written, or the acquisition cannot be made, and managerd's
// policy retries it.
func (h *CheckHandler) Run(ctx context.Context, t agent.Task) agent.Result {
	var p CheckPrompt
	if err := json.Unmarshal(t.Env.Prompt, &p); err != nil {
		return agent.Result{Err: fmt.Errorf("source.check prompt: %w", err)}
	}
	res, err := h.check(ctx, &p)
	if res != nil {
		werr := t.Fenced()
		if werr == nil {
			werr = crawl.WriteResult(t.Env.Runtime.Dir, res)
		}
		if werr != nil && err == nil {
			err = fmt.Errorf("write result: %w", werr)
		}
	}
	return agent.Result{Err: err}
}

func (h *CheckHandler) check(ctx context.Context, p *CheckPrompt) (*CheckResult, error) {
	res := &CheckResult{Kind: KindCheck, Source: p.Source, CheckedAt: h.now()}
	src, err := source.Load(h.Spool, p.Source)
	if err != nil {
		if errors.Is(err, source.ErrNotFound) {
			res.Skipped = "source removed"
			return res, nil
		}
		return res, err
	}
	res.URL = src.URL
	if p.Due != "" && src.DueStamp() != p.Due {
		res.Skipped = "checked already (next check " + src.DueStamp() + ")"
	} else if why, until := registryDefers(h.Spool, src.Domain, h.now()); why != "" {
		// No request, robots.txt's included (registry.go).
		if err := h.deferCheck(src, res, why, until); err != nil {
			return res, err
		}
	} else {
		interval := time.Duration(p.MinIntervalMS) * time.Millisecond
		allowed, why, delay, err := h.robotsAllowed(ctx, src, interval) // robots.go
		if err != nil {
			return res, fmt.Errorf("check %s: %w", src.Name, err)
		}
		if !allowed {
			if err := h.refuse(src, res, why); err != nil {
				return res, err
			}
		} else {
			// The site's Crawl-delay, when longer, is the interval.
			turn, err := h.Fetch.Gates.Wait(ctx, src.Domain, checkAsk(max(interval, delay)))
			if err != nil {
				return res, fmt.Errorf("check %s: domain gate: %w", src.Name, err)
			}
			if err := h.checkOnce(ctx, src, res, turn); err != nil {
				return res, err
			}
		}
	}
	if p.Acquire {
		a, err := AcquireWith(h.Spool, p.Source, h.now(), p.Budget)
		if err != nil {
			return res, fmt.Errorf("acquire %s: %w", p.Source, err)
		}
		if a.Action != "" || a.Deferred != "" {
			res.Acquire = &a
		}
	}
	return res, nil
}

// checkAsk is what a check (or its robots.txt fetch) asks of its
// domain's politeness gate: its interval, and no other request to the
// domain under way, whoever makes it.
func checkAsk(interval time.Duration) politeness.Ask {
	return politeness.Ask{Interval: interval, MaxInFlight: 1}
}

// checkOnce makes the request with turn, the request's turn at its
// domain's politeness gate (done when the request is answered), and
// records its outcome in the source.
func (h *CheckHandler) checkOnce(ctx context.Context, src *source.Source, res *CheckResult, turn *politeness.Turn) error {
	req := fetch.GetRequest{
		URL: src.URL, UserAgent: src.UserAgent, Resolve: src.Resolve, AllowPrivate: src.AllowPrivate,
		ConnectTimeout: min(src.Timeout.D(), 10*time.Second), Timeout: src.Timeout.D(), MaxBytes: MaxCheckBytes, Turn: turn,
	}
	// Validators only with a hash to fall back on: a 304 must mean "as
	// the content we hashed".
	if src.ContentHash != "" {
		req.IfNoneMatch, req.IfModifiedSince = src.ETag, src.LastModified
	}
	res.Conditional = req.IfNoneMatch != "" || req.IfModifiedSince != ""
	resp, gerr := h.Fetch.Get(ctx, req)
	if ctx.Err() != nil {
		// Stopped (drain, timeout, cancel): nothing recorded; the job
		// ends by its agent's decision.
		return fmt.Errorf("check %s: %w", src.Name, ctx.Err())
	}
	now := h.now()
	res.CheckedAt, res.DurationMS, res.HTTPStatus = now, resp.Duration.Milliseconds(), resp.Status
	var hash string
	outcome := source.Failed
	errMsg, errCode := "", ""
	obs := observation(src, resp, gerr, now)
	switch {
	case gerr != nil:
		errMsg, errCode = gerr.Error(), resp.ErrorCode
	case obs.LoginWall != "":
		// The page is a login page, not the source's content
		// (registry.go).
		what := "a login form"
		if obs.LoginWall == crawl.LoginWallRedirect {
			what = "a redirect to " + obs.RedirectTo
		}
		errMsg, errCode = fmt.Sprintf("HTTP %d: login wall: answered %s", resp.Status, what), ErrCodeLoginWall
	case resp.Status == 304 && res.Conditional:
		outcome = source.Unchanged
	case resp.Status >= 200 && resp.Status < 300:
		sum := sha256.Sum256(NormalizeBody(resp.Body))
		hash = hex.EncodeToString(sum[:])
		res.BodyBytes = len(resp.Body)
		outcome = source.Changed
		if hash == src.ContentHash {
			outcome = source.Unchanged
		}
	case resp.Status >= 300 && resp.Status < 400:
		errMsg, errCode = fmt.Sprintf("HTTP %d: redirected to %q (redirects are not followed; register that URL instead)", resp.Status, resp.Headers["Location"]), "redirect"
	default:
		errMsg, errCode = fmt.Sprintf("HTTP %d", resp.Status), "http_status"
	}
	res.Error, res.ErrorCode = errMsg, errCode
	if resp.ErrorCode != crawl.ErrCodePrivate { // a refusal made no request
		verdict, rerr := h.observe(src, obs)
		res.Registry = verdict
		if rerr != nil {
			res.RegistryError = rerr.Error()
		}
	}
	s, err := source.Update(h.Spool, src.Name, now, func(s *source.Source) error {
		if s.DueStamp() != src.DueStamp() {
			return errCheckedMeanwhile
		}
		s.Checks++
		s.Deferred = ""
		t := now
		s.LastCheckedAt, s.LastHTTPStatus = &t, resp.Status
		o := outcome
		if o == source.Failed {
			s.ConsecutiveFailures++
			s.LastError = errMsg
		} else {
			s.ConsecutiveFailures, s.LastError = 0, ""
			if o == source.Changed || o == source.Unchanged {
				if hash != "" {
					s.ContentHash = hash
					s.ETag, s.LastModified = resp.Headers["ETag"], resp.Headers["Last-Modified"]
				} else if v := resp.Headers["ETag"]; v != "" {
					s.ETag = v // a 304 may send a fresh ETag
				}
			}
			if o == source.Changed {
				s.LastChangedAt = &t
			}
			if s.Acquisitions == 0 {
				o = source.First
			}
			if o == source.Changed || o == source.First {
				s.AcquirePending, s.AcquirePendingSince = true, &t
			}
		}
		s.LastOutcome = o
		next := s.NextCheck(now, h.rnd)
		s.NextCheckAfter = &next
		return nil
	})
	if err != nil {
		if errors.Is(err, errCheckedMeanwhile) {
			res.Skipped = "checked meanwhile by another job"
			return nil
		}
		return err
	}
	res.Outcome, res.ContentHash = s.LastOutcome, hash
	res.NextCheckAfter, res.Failures = s.NextCheckAfter, s.ConsecutiveFailures
	return nil
}

var errCheckedMeanwhile = errors.New("source checked meanwhile")

// refuse records a check robots.txt did not allow: no request, a failed
// outcome saying why (the source backs off as after any failure).
func (h *CheckHandler) refuse(src *source.Source, res *CheckResult, why string) error {
	now := h.now()
	res.CheckedAt, res.Error, res.ErrorCode = now, why, ErrCodeRobotsDenied
	s, err := source.Update(h.Spool, src.Name, now, func(s *source.Source) error {
		if s.DueStamp() != src.DueStamp() {
			return errCheckedMeanwhile
		}
		t := now
		s.LastCheckedAt, s.LastHTTPStatus = &t, 0
		s.ConsecutiveFailures++
		s.LastError, s.LastOutcome, s.Deferred = why, source.Failed, ""
		next := s.NextCheck(now, h.rnd)
		s.NextCheckAfter = &next
		return nil
	})
	if err != nil {
		if errors.Is(err, errCheckedMeanwhile) {
			res.Skipped = "checked meanwhile by another job"
			return nil
		}
		return err
	}
	res.Outcome, res.NextCheckAfter, res.Failures = s.LastOutcome, s.NextCheckAfter, s.ConsecutiveFailures
	return nil
}

// NormalizeBody is what a source's content hash is computed over: the
// body with every run of white space (Unicode) collapsed to one space and
// the ends trimmed, so that re-indentation and line-ending changes are not
// changes. Invalid UTF-8 bytes are kept as they are.
func NormalizeBody(b []byte) []byte {
	out := make([]byte, 0, len(b))
	space := false
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			out = append(out, b[0])
			space = false
			b = b[1:]
			continue
		}
		if unicode.IsSpace(r) {
			space = true
		} else {
			if space && len(out) > 0 {
				out = append(out, ' ')
			}
			space = false
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return bytes.TrimSpace(out)
}
