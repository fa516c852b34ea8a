package crawl

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestObserveCheck: a source check's outcomes judged by the crawl's
// rules in the registry: 403 streaks, login walls, outages, and what a
// good answer does (and does not) clear.
func TestObserveCheck(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	c := New("src-a")
	obs := func(status int, at time.Time) CheckObservation {
		return CheckObservation{Source: "a", URL: "http://a.test/page", HTTPStatus: status, At: at}
	}

	// 403s: blocked/forbidden at the block_threshold-th in a row, for
	// the forbidden cooldown (14 days), not before.
	var e *RegistryEntry
	var verdict string
	for i := 1; i <= c.BlockThreshold; i++ {
		var refused error
		e, verdict, refused = ObserveCheck(e, c, "a.test", "a.test", obs(403, now))
		if refused != nil {
			t.Fatal(refused)
		}
		if i < c.BlockThreshold && (verdict != "" || e.Status != DomainPending) {
			t.Fatalf("403 #%d: verdict %q, status %s", i, verdict, e.Status)
		}
	}
	until := now.Add(DefaultForbiddenCooldown)
	if verdict != "blocked/forbidden" || e.Status != DomainBlocked || e.Reason != ReasonForbidden || !sameTime(e.CooldownUntil, &until) ||
		e.StatusSource != "a" || e.StatusCrawl != "" || e.Checks.Requests != int64(c.BlockThreshold) || e.Checks.ConsecutiveErrors != 0 {
		t.Fatalf("after %d 403s: verdict %q, %+v, checks %+v", c.BlockThreshold, verdict, e, e.Checks)
	}
	if why := RegistryDefers(e, now.Add(time.Hour)); !strings.Contains(why, "blocked (forbidden)") || !strings.Contains(why, "the check of source a") {
		t.Errorf("defers: %q", why)
	}
	if RegistryDefers(e, until.Add(time.Second)) != "" {
		t.Error("defers after the cooldown")
	}
	// A crawl meeting the domain adopts the block.
	d := NewDomain("a.test", "a.test", now)
	if !Adopt(e, d, now.Add(time.Hour)) || d.Status != DomainBlocked || !strings.Contains(d.ReasonDetail, "the check of source a") {
		t.Errorf("adopted: %+v", d)
	}
	// A good answer while the cooldown lasts (a check already under way)
	// clears nothing; after it, the entry is pending again.
	e, verdict, _ = ObserveCheck(e, c, "a.test", "a.test", obs(200, now.Add(time.Hour)))
	if verdict != "" || e.Status != DomainBlocked {
		t.Errorf("200 during the cooldown: verdict %q, status %s", verdict, e.Status)
	}
	e, verdict, _ = ObserveCheck(e, c, "a.test", "a.test", obs(304, until.Add(time.Minute)))
	if verdict != "pending" || e.Status != DomainPending || e.Reason != ReasonCooldownOver || e.CooldownUntil != nil {
		t.Errorf("304 after the cooldown: verdict %q, %+v", verdict, e)
	}

	// A login wall on a domain nothing had a good answer from: blocked
	// at once, login_required, 30 days.
	w := obs(200, now)
	w.LoginWall = LoginWallForm
	e2, verdict, _ := ObserveCheck(nil, c, "w.test", "w.test", w)
	until = now.Add(DefaultLoginWallCooldown)
	if verdict != "blocked/login_required" || !sameTime(e2.CooldownUntil, &until) || !strings.Contains(e2.ReasonDetail, "login form") {
		t.Errorf("login wall: verdict %q, %+v", verdict, e2)
	}
	// After good answers, a wall blocks only at the threshold in a row.
	e3, _, _ := ObserveCheck(nil, c, "x.test", "x.test", obs(200, now))
	for i := 1; i < c.BlockThreshold; i++ {
		if e3, verdict, _ = ObserveCheck(e3, c, "x.test", "x.test", w); verdict != "" {
			t.Fatalf("wall #%d after a good answer blocked: %q", i, verdict)
		}
	}
	if _, verdict, _ = ObserveCheck(e3, c, "x.test", "x.test", w); verdict != "blocked/login_required" {
		t.Errorf("wall #%d: verdict %q", c.BlockThreshold, verdict)
	}

	// Network failures: unreachable once the streak reaches the threshold
	// and has lasted unreachable_after; a timeout keeps its reason.
	n := CheckObservation{Source: "a", URL: "http://n.test/", NetErrorCode: ErrCodeTimeout, NetError: "GET: timeout", At: now}
	var e4 *RegistryEntry
	for i := 0; i < c.UnreachableThreshold; i++ {
		e4, verdict, _ = ObserveCheck(e4, c, "n.test", "n.test", n)
	}
	if verdict != "" {
		t.Fatalf("a streak shorter than unreachable_after judged: %q", verdict)
	}
	n.At = now.Add(c.UnreachableAfter.D())
	e4, verdict, _ = ObserveCheck(e4, c, "n.test", "n.test", n)
	if verdict != "unreachable/timeout" || e4.CooldownUntil == nil || !e4.CooldownUntil.Equal(n.At.Add(DefaultUnreachableCooldown)) {
		t.Errorf("outage: verdict %q, %+v", verdict, e4)
	}

	// An exhausted domain goes to blocked (through active); an
	// unreachable one still cooling down is not made blocked.
	ex := &RegistryEntry{Domain: "e.test", Status: DomainExhausted, Crawls: map[string]*RegistryCrawl{}}
	for i := 0; i < c.BlockThreshold; i++ {
		ex, verdict, _ = ObserveCheck(ex, c, "e.test", "e.test", obs(429, now))
	}
	if verdict != "blocked/rate_limited" || ex.Status != DomainBlocked {
		t.Errorf("exhausted, then 429s: verdict %q, status %s", verdict, ex.Status)
	}
	for i := 0; i < c.BlockThreshold-1; i++ {
		e4, _, _ = ObserveCheck(e4, c, "n.test", "n.test", obs(503, n.At))
	}
	_, verdict, refused := ObserveCheck(e4, c, "n.test", "n.test", obs(503, n.At))
	if verdict != "" || !errors.Is(refused, ErrIllegalDomainTransition) || e4.Status != DomainUnreachable {
		t.Errorf("503s on a cooling unreachable domain: verdict %q, refused %v, status %s", verdict, refused, e4.Status)
	}

	// A deferred check is recorded as the source's, with no request.
	e5, verdict, _ := ObserveCheck(e, c, "a.test", "a.test", CheckObservation{Source: "b", Deferred: true, At: now})
	if verdict != "" || e5.Checks.Sources["b"].Result != CheckResultDeferred || strings.Join(e5.Checks.SourceNames(), ",") != "a,b" {
		t.Errorf("deferred: %q %+v", verdict, e5.Checks)
	}
}
