package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/agent"
	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/robots"
)

// MaxRobotsRedirects is how many redirects of robots.txt are followed
// (RFC 9309 section 2.3.1.2: at least five).
const MaxRobotsRedirects = 5

// RobotsHandler runs crawl.robots jobs: it fetches one origin's robots.txt
// following up to five redirects, stores the body, and records the
// verdict of RFC 9309 section 2.3.1: 2xx "rules" (the stored body is
// parsed by whoever checks a URL), 4xx "allow_all" (unavailable) except 429,
// 5xx, 429 and network failures "disallow_all" (unreachable), more than
// five redirects "allow_all" (unavailable). The job always succeeds unless
// it is stopped: the frontier decides when to ask again.
type RobotsHandler struct {
	Handler *Handler
}

// Run implements agent.Handler.
func (rh *RobotsHandler) Run(ctx context.Context, t agent.Task) agent.Result {
	var p crawl.RobotsPrompt
	if err := json.Unmarshal(t.Env.Prompt, &p); err != nil {
		return agent.Result{Err: fmt.Errorf("crawl.robots prompt: %w", err)}
	}
	st, err := crawl.Open(rh.Handler.Spool, p.Crawl)
	if err != nil {
		return agent.Result{Err: fmt.Errorf("crawl.robots prompt: %w", err)}
	}
	art := &crawl.RobotsArtifact{Kind: crawl.KindRobots, Crawl: p.Crawl, JobID: t.Env.Lifecycle.ID, Origin: p.Origin}
	rh.fetch(ctx, st, &p, art)
	if p.Sitemaps && ctx.Err() == nil {
		rh.readSitemaps(ctx, st, &p, art) // sitemap.go
	}
	if ctx.Err() != nil {
		return agent.Result{Err: fmt.Errorf("robots.txt of %s: stopped: %w", p.Origin, context.Cause(ctx))}
	}
	if err := t.Fenced(); err != nil {
		return agent.Result{Err: fmt.Errorf("write result: %w", err)}
	}
	if err := crawl.WriteResult(t.Env.Runtime.Dir, art); err != nil {
		return agent.Result{Err: fmt.Errorf("write result: %w", err)}
	}
	return agent.Result{}
}

func (rh *RobotsHandler) fetch(ctx context.Context, st *crawl.Store, p *crawl.RobotsPrompt, art *crawl.RobotsArtifact) {
	h := rh.Handler
	maxBytes := max(p.MaxBytes, int64(robots.MaxBytes))
	target := strings.TrimSuffix(p.Origin, "/") + "/robots.txt"
	originURL, err := url.Parse(p.Origin)
	if err != nil || originURL.Host == "" {
		art.Verdict, art.ErrorCode, art.Error = crawl.RobotsDisallowAll, crawl.ErrCodeBadURL, "bad origin "+p.Origin
		art.FetchedAt = time.Now().UTC()
		return
	}
	start := time.Now()
	defer func() { art.DurationMS = time.Since(start).Milliseconds() }()
	for hop := 0; ; hop++ {
		tu, err := url.Parse(target)
		if err != nil || (tu.Scheme != "http" && tu.Scheme != "https") || tu.Host == "" {
			// A redirect to something unfetchable: unavailable.
			art.Verdict, art.ErrorCode, art.Error = crawl.RobotsAllowAll, crawl.ErrCodeBadURL, "robots.txt redirects to "+target
			return
		}
		// Every hop waits at its own domain's gate: a redirect to
		// another site is a request to that site.
		interval := time.Duration(p.MinIntervalMS) * time.Millisecond
		dom := p.Domain
		if !strings.EqualFold(tu.Host, originURL.Host) {
			if d, _, derr := crawl.DomainOf(target); derr == nil {
				dom = d
			}
		}
		tk, err := h.wait(ctx, dom, interval, p.MaxInFlightPerDomain)
		if err != nil {
			art.HTTPStatus, art.Verdict = 0, crawl.RobotsDisallowAll
			art.ErrorCode, art.Error = crawl.ErrCodeNetwork, "not sent: "+err.Error()
			art.FetchedAt = time.Now().UTC()
			return
		}
		res, err := h.do(ctx, tk, target, p.UserAgent, p.Resolve, p.AllowPrivate, p.ConnectTimeoutMS, p.TimeoutMS, maxBytes)
		if hop == 0 {
			art.FetchedAt = res.start.UTC()
		}
		art.FinalURL, art.Redirects = target, hop
		if err != nil {
			art.HTTPStatus, art.Verdict = 0, crawl.RobotsDisallowAll
			art.ErrorCode, art.Error = classify(err), err.Error()
			return
		}
		art.HTTPStatus = res.status
		switch {
		case res.status >= 200 && res.status < 300:
			art.Verdict = crawl.RobotsRules
			sum := sha256.Sum256(res.body)
			art.BodySHA256, art.BodyBytes, art.Truncated = hex.EncodeToString(sum[:]), int64(len(res.body)), res.truncated
			if err := st.PutBody(art.BodySHA256, res.body); err != nil {
				art.Verdict, art.ErrorCode, art.Error = crawl.RobotsDisallowAll, crawl.ErrCodeNetwork, "store robots.txt: "+err.Error()
			}
			return
		case res.status >= 300 && res.status < 400:
			loc := res.headers["Location"]
			if loc == "" {
				art.Verdict, art.Error = crawl.RobotsAllowAll, fmt.Sprintf("%d without Location: unavailable", res.status)
				return
			}
			if hop >= MaxRobotsRedirects {
				art.Verdict, art.ErrorCode = crawl.RobotsAllowAll, crawl.ErrCodeRedirects
				art.Error = fmt.Sprintf("more than %d redirects: unavailable", MaxRobotsRedirects)
				return
			}
			next, err := tu.Parse(loc)
			if err != nil {
				art.Verdict, art.ErrorCode, art.Error = crawl.RobotsAllowAll, crawl.ErrCodeBadURL, "bad Location "+loc
				return
			}
			target = next.String()
		case res.status == http.StatusTooManyRequests || res.status >= 500:
			art.Verdict = crawl.RobotsDisallowAll
			art.Error = fmt.Sprintf("robots.txt answered %d: unreachable, disallow all", res.status)
			return
		default: // other 4xx (and 1xx oddities): unavailable, allow all
			art.Verdict = crawl.RobotsAllowAll
			return
		}
	}
}
