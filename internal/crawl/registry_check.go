package crawl

import (
	"fmt"
	"sort"
	"time"
)

// Source checks in the domain registry (docs/PIPELINE.md, "A check and
// the domain registry"). A check is one request to one URL, made by the
// pipeline, not by a crawl: it is not one of the entry's crawls (no
// pages, no yield), and is kept in the entry's checks: the sources that
// check the domain and the checks' own streaks. Its outcome is judged by
// the crawl's rules, with the thresholds and per-reason cooldowns of the
// source's crawl configuration:
//
//   - 403, 429 and 5xx in a row reaching block_threshold block the domain
//     (forbidden, rate_limited, server_errors), for the reason's cooldown;
//   - a login wall blocks it (login_required) at once when no check has
//     had a good answer and no crawl a new page from the domain yet, else
//     at the block_threshold-th wall in a row;
//   - network failures in a row judged an outage (unreachable_threshold
//     reached, lasting unreachable_after) make it unreachable;
//   - any other answer ends the streaks; a 2xx or 304 after a block's
//     cooldown is over puts the entry back to pending (cooldown_over). An
//     answer never clears a status whose cooldown is not over: a check
//     does not make a request then (RegistryDefers).

// RegistryChecks is what source checks wrote back about a domain.
type RegistryChecks struct {
	// Sources are the sources that check the domain, by name.
	Sources map[string]*RegistrySourceCheck `json:"sources"`
	// Requests made by checks (robots.txt aside), answers counted as
	// errors (403, 429, 5xx, network failures), good answers (2xx, 304).
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
	Good     int64 `json:"good"`
	// The streaks, as a crawl's domain keeps them.
	ConsecutiveErrors     int        `json:"consecutive_errors"`
	ConsecutiveNetErrors  int        `json:"consecutive_net_errors"`
	NetErrorsSince        *time.Time `json:"net_errors_since,omitempty"`
	ConsecutiveLoginWalls int        `json:"consecutive_login_walls"`
	UpdatedAt             time.Time  `json:"updated_at"`
}

// RegistrySourceCheck is one source's last check of the domain.
type RegistrySourceCheck struct {
	CheckedAt  time.Time `json:"checked_at"`
	HTTPStatus int       `json:"http_status"`
	// Result: ok, error (403/429/5xx or network), login_wall, other (any
	// other answer), deferred (no request: the registry's cooldown).
	Result string `json:"result"`
}

// SourceNames are the sources that check the domain, sorted.
func (c *RegistryChecks) SourceNames() []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.Sources))
	for n := range c.Sources {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// StatusBy names who set the entry's status, for messages.
func (e *RegistryEntry) StatusBy() string {
	switch {
	case e.StatusCrawl != "":
		return "crawl " + e.StatusCrawl
	case e.StatusSource != "":
		return "the check of source " + e.StatusSource
	case e.Reason == ReasonReset:
		return "an operator's reset"
	}
	return "a crawl"
}

// RegistryDefers says why a request to the entry's domain must not be
// made at now ("" when it may): a blocked or unreachable status whose
// cooldown is not over, whoever set it. A nil entry defers nothing.
func RegistryDefers(e *RegistryEntry, now time.Time) string {
	if e == nil || !e.CoolingDown(now) {
		return ""
	}
	why := string(e.Status)
	if e.Reason != "" {
		why += " (" + e.Reason + ")"
	}
	return fmt.Sprintf("domain %s is %s in the domain registry, by %s at %s, until %s: not requested", e.Domain, why, e.StatusBy(),
		e.StatusAt.UTC().Format(time.RFC3339), e.CooldownUntil.UTC().Format(time.RFC3339))
}

// Check results of RegistrySourceCheck.
const (
	CheckResultOK        = "ok"
	CheckResultError     = "error"
	CheckResultLoginWall = "login_wall"
	CheckResultOther     = "other"
	CheckResultDeferred  = "deferred"
)

// CheckObservation is the outcome of one source check's request.
type CheckObservation struct {
	Source string
	URL    string
	// HTTPStatus of the answer (0: none, NetErrorCode says why).
	HTTPStatus int
	// NetErrorCode: the fetcher's code of a request that got no answer
	// (dns_failure, connect_failure, timeout, ...), NetError its message.
	NetErrorCode, NetError string
	// LoginWall: LoginWallRedirect or LoginWallForm when the answer is a
	// login wall (the fetcher's heuristics), RedirectTo the Location.
	LoginWall, RedirectTo string
	// Deferred: no request was made (the registry's cooldown).
	Deferred bool
	At       time.Time
}

// ObserveCheck records a source check of domain in entry e (nil: a new
// entry, which is returned), judged by crawl configuration c (the
// source's crawl: thresholds and cooldowns). verdict is the status
// change it made, "" for none; refused says why a change was not made
// (an illegal transition).
func ObserveCheck(e *RegistryEntry, c *Crawl, domain, parent string, o CheckObservation) (out *RegistryEntry, verdict string, refused error) {
	now := o.At
	if e == nil {
		e = &RegistryEntry{Domain: domain, ParentDomain: parent, Status: DomainPending, FirstSeenAt: now, StatusAt: now,
			Crawls: map[string]*RegistryCrawl{}}
	}
	if e.FirstSeenAt.IsZero() {
		e.FirstSeenAt = now
	}
	if e.Checks == nil {
		e.Checks = &RegistryChecks{}
	}
	k := e.Checks
	if k.Sources == nil {
		k.Sources = map[string]*RegistrySourceCheck{}
	}
	k.UpdatedAt, e.UpdatedAt = now, now
	rec := &RegistrySourceCheck{CheckedAt: now, HTTPStatus: o.HTTPStatus}
	k.Sources[o.Source] = rec
	if o.Deferred {
		rec.Result = CheckResultDeferred
		return e, "", nil
	}
	k.Requests++
	s := o.HTTPStatus
	var to DomainStatus
	var reason, detail string
	switch {
	case o.LoginWall != "":
		rec.Result = CheckResultLoginWall
		k.ConsecutiveLoginWalls++
		first := k.Good == 0 && e.PagesNew == 0
		if first || k.ConsecutiveLoginWalls >= c.BlockThreshold {
			what := "a login form"
			if o.LoginWall == LoginWallRedirect {
				what = "a redirect to " + clip(o.RedirectTo, 200)
			}
			to, reason = DomainBlocked, ReasonLoginRequired
			detail = fmt.Sprintf("login wall: %s answered %s", clip(o.URL, 200), what)
			if !first {
				detail += fmt.Sprintf(" (%d login walls in a row)", k.ConsecutiveLoginWalls)
			}
		}
	case s == 0:
		rec.Result = CheckResultError
		k.Errors++
		k.ConsecutiveErrors = 0
		if k.ConsecutiveNetErrors == 0 || k.NetErrorsSince == nil {
			t := now
			k.NetErrorsSince = &t
		}
		k.ConsecutiveNetErrors++
		if c.OutageJudged(k.ConsecutiveNetErrors, *k.NetErrorsSince, now) {
			to, reason = DomainUnreachable, o.NetErrorCode
			switch reason {
			case ReasonDNSFailure, ReasonConnectFailure, ReasonTimeout:
			default:
				reason = ReasonNetworkFailure
			}
			detail = fmt.Sprintf("%d consecutive network failures of source checks (last: %s)", k.ConsecutiveNetErrors, clip(o.NetError, 200))
		}
	case s == 403 || s == 429 || s >= 500:
		rec.Result = CheckResultError
		k.Errors++
		k.ConsecutiveErrors++
		k.ConsecutiveNetErrors, k.NetErrorsSince = 0, nil
		reason = ReasonServerErrors
		switch s {
		case 403:
			reason = ReasonForbidden
		case 429:
			reason = ReasonRateLimited
		}
		if k.ConsecutiveErrors >= c.BlockThreshold {
			to = DomainBlocked
			detail = fmt.Sprintf("%d consecutive 403/429/5xx responses to source checks (last %d)", k.ConsecutiveErrors, s)
		}
	default:
		rec.Result = CheckResultOther
		k.ConsecutiveErrors, k.ConsecutiveNetErrors, k.NetErrorsSince = 0, 0, nil
		good := (s >= 200 && s < 300) || s == 304
		if good {
			rec.Result = CheckResultOK
			k.Good++
			if !IsLoginURL(o.URL) {
				k.ConsecutiveLoginWalls = 0
			}
			if (e.Status == DomainBlocked || e.Status == DomainUnreachable) && !e.CoolingDown(now) {
				e.setStatus(DomainPending, ReasonCooldownOver, fmt.Sprintf("source check %s answered %d after the cooldown", o.Source, s),
					"", o.Source, nil, nil, now)
				return e, string(DomainPending), nil
			}
		}
	}
	if to == "" {
		return e, "", nil
	}
	// A block of the domain: its streaks start again after it.
	k.ConsecutiveErrors, k.ConsecutiveNetErrors, k.NetErrorsSince, k.ConsecutiveLoginWalls = 0, 0, nil, 0
	from := e.Status
	switch {
	case (from == DomainBlocked || from == DomainUnreachable) && !e.CoolingDown(now):
		from = DomainPending
	case from == DomainExhausted:
		from = DomainActive // exhausted -> active -> blocked, as a crawl's domain goes
	}
	if !CanTransitionDomain(from, to) {
		return e, "", fmt.Errorf("domain %s: %w in the registry: %s (%s, by %s) -> %s (source %s); kept %s", domain, ErrIllegalDomainTransition,
			e.Status, e.Reason, e.StatusBy(), to, o.Source, e.Status)
	}
	cd := c.CooldownFor(to, reason)
	if cd <= 0 {
		cd = c.BlockCooldown.D()
	}
	until := now.Add(cd)
	if e.CoolingDown(now) && e.CooldownUntil.After(until) {
		until = *e.CooldownUntil // a longer rest another observer set stays
	}
	detail += "; not requested before " + until.UTC().Format(time.RFC3339)
	e.setStatus(to, reason, detail, "", o.Source, &until, nil, now)
	return e, string(to) + "/" + reason, nil
}

// clip cuts s to its first line, at most n bytes.
func clip(s string, n int) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' {
			s = s[:i]
			break
		}
	}
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
