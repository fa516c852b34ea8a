package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/fetch"
	"github.com/farro-dev/farro/internal/robots"
	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/internal/urlnorm"
	"github.com/farro-dev/farro/pkg/fsq"
)

// Source checks obey robots.txt (docs/PIPELINE.md, "A check"): before its
// request a check reads the robots.txt of the source's origin, from a copy
// kept in <spool>/pipeline/robots/ for RobotsTTL, or fetched through the
// domain's politeness gate (one more request, spaced like the checks). Its
// Crawl-delay for the source's user agent, capped at MaxCrawlDelay, raises
// the check's interval. A URL the
// rules disallow for the source's user agent is not fetched; the check
// fails with error code robots_denied and the rule in its error. As for
// crawls (RFC 9309): 4xx allows everything, 5xx, 429 and network failures
// disallow everything (not kept: the next check asks again), and up to
// five redirects are followed.

// RobotsDir holds the robots.txt copies of source checks, one file per
// origin (named by a hash of it).
var RobotsDir = filepath.Join("pipeline", "robots")

// RobotsTTL is how long a robots.txt copy is used.
const RobotsTTL = 24 * time.Hour

// maxRobotsBytes caps a robots.txt read (RFC 9309 asks for at least 500 KiB).
const maxRobotsBytes = 512 << 10

// ErrCodeRobotsDenied is a check's error code when robots.txt disallows
// its URL (or is unreachable).
const ErrCodeRobotsDenied = "robots_denied"

// robotsCopy is one file of RobotsDir.
type robotsCopy struct {
	Origin     string    `json:"origin"`
	FetchedAt  time.Time `json:"fetched_at"`
	HTTPStatus int       `json:"http_status"`
	Body       string    `json:"body,omitempty"`
}

func robotsPath(origin string) string {
	h := sha256.Sum256([]byte(origin))
	return filepath.Join(RobotsDir, hex.EncodeToString(h[:16])+".json")
}

// MaxCrawlDelay caps the robots.txt Crawl-delay a check waits (as a
// crawl's default --max-crawl-delay does).
const MaxCrawlDelay = 30 * time.Second

// robotsAllowed tells whether src's URL may be fetched; when not, why
// says so in one line. delay is the robots.txt's Crawl-delay for the
// source's user agent (capped at MaxCrawlDelay; 0 without one). err is a
// stopped context.
func (h *CheckHandler) robotsAllowed(ctx context.Context, src *source.Source, interval time.Duration) (ok bool, why string, delay time.Duration, err error) {
	u, perr := url.Parse(src.URL)
	origin, oerr := crawl.Origin(src.URL)
	if perr != nil || oerr != nil {
		return true, "", 0, nil // the check itself reports the bad URL
	}
	now := h.now()
	path := h.Spool.Path(robotsPath(origin))
	var rc robotsCopy
	// The copy is read capped (JSON escapes can make a body several
	// times longer) and without blocking: anything unreadable is fetched
	// again and replaced.
	if b, rerr := fsq.ReadFileCapped(path, 8*maxRobotsBytes); rerr != nil || json.Unmarshal(b, &rc) != nil || rc.Origin != origin ||
		now.Sub(rc.FetchedAt) >= RobotsTTL || rc.FetchedAt.After(now.Add(time.Minute)) {
		rc, why, err = h.fetchRobots(ctx, src, origin, interval)
		if err != nil {
			return false, "", 0, err
		}
		if why != "" {
			return false, why, 0, nil
		}
	}
	r := robots.ForStatus(rc.HTTPStatus, []byte(rc.Body))
	if d, ok := r.CrawlDelay(src.UserAgent); ok {
		delay = min(d, MaxCrawlDelay)
	}
	allowed, rule := r.Allowed(src.UserAgent, u.RequestURI())
	if allowed {
		return true, "", delay, nil
	}
	what := "disallow all"
	if rule != nil && rule.Line > 0 {
		what = fmt.Sprintf("line %d: Disallow: %s", rule.Line, rule.Pattern)
	} else if rc.HTTPStatus != 0 && (rc.HTTPStatus < 200 || rc.HTTPStatus > 299) {
		what = fmt.Sprintf("HTTP %d: disallow all", rc.HTTPStatus)
	}
	return false, fmt.Sprintf("not fetched: disallowed by %s/robots.txt (%s)", origin, what), delay, nil
}

// fetchRobots fetches origin's robots.txt through the gate of each
// request's domain, following up to five redirects, and keeps the copy
// when the answer is not a failure (5xx, 429, network: why says so).
func (h *CheckHandler) fetchRobots(ctx context.Context, src *source.Source, origin string, interval time.Duration) (robotsCopy, string, error) {
	target := origin + "/robots.txt"
	rc := robotsCopy{Origin: origin}
	for hop := 0; ; hop++ {
		dom, _, derr := crawl.DomainOf(target)
		if derr != nil {
			dom = src.Domain
		}
		turn, err := h.Fetch.Gates.Wait(ctx, dom, checkAsk(interval))
		if err != nil {
			return rc, "", fmt.Errorf("robots.txt: domain gate: %w", err)
		}
		resp, gerr := h.Fetch.Get(ctx, fetch.GetRequest{URL: target, UserAgent: src.UserAgent, Resolve: src.Resolve, AllowPrivate: src.AllowPrivate,
			ConnectTimeout: min(src.Timeout.D(), 10*time.Second), Timeout: src.Timeout.D(), MaxBytes: maxRobotsBytes, Turn: turn})
		if ctx.Err() != nil {
			return rc, "", ctx.Err()
		}
		if gerr != nil {
			return rc, fmt.Sprintf("not fetched: %s unreachable (%s): disallow all", target, firstLine(gerr.Error())), nil
		}
		if resp.Status >= 300 && resp.Status < 400 && resp.Headers["Location"] != "" && hop < 5 {
			next, rerr := urlnorm.Resolve(target, resp.Headers["Location"], urlnorm.Options{})
			if rerr == nil {
				target = next
				continue
			}
		}
		if resp.Status == 429 || resp.Status >= 500 {
			return rc, fmt.Sprintf("not fetched: %s answered %d: disallow all", target, resp.Status), nil
		}
		rc.FetchedAt, rc.HTTPStatus, rc.Body = h.now(), resp.Status, string(resp.Body)
		if resp.Status >= 300 && resp.Status < 400 {
			rc.Body = "" // more than five redirects: allow all (RFC 9309)
		}
		if b, err := json.Marshal(&rc); err == nil {
			if err := fsq.MkdirDurable(h.Spool.Path(RobotsDir)); err == nil {
				_ = fsq.WriteFile(h.Spool.Path(robotsPath(origin)), b) // a copy: lost, it is fetched again
			}
		}
		return rc, "", nil
	}
}

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
