package crawl

import (
	"strings"
	"testing"
	"time"
)

// TestCooldownDefaults: a new crawl has seed 004's per-reason cooldowns;
// a crawl.json written before they existed rests every blocked domain
// its block_cooldown, as it did; CooldownFor picks by status and reason;
// negative cooldowns are refused.
func TestCooldownDefaults(t *testing.T) {
	c := New("c")
	c.Seeds = []Seed{{URL: "http://a.test/"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	for _, tc := range []struct {
		to     DomainStatus
		reason string
		want   time.Duration
	}{
		{DomainBlocked, ReasonLoginRequired, 30 * day},
		{DomainBlocked, ReasonRateLimited, 7 * day},
		{DomainBlocked, ReasonForbidden, 14 * day},
		{DomainUnreachable, ReasonDNSFailure, 7 * day},
		{DomainBlocked, ReasonServerErrors, time.Hour},
		{DomainBlocked, ReasonRobotsUnavailable, time.Hour},
	} {
		if got := c.CooldownFor(tc.to, tc.reason); got != tc.want {
			t.Errorf("new crawl: %s %s rests %s, want %s", tc.to, tc.reason, got, tc.want)
		}
	}
	// Written and read back: the same.
	back, err := ParseCrawl(c.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if back.Cooldowns != c.Cooldowns {
		t.Errorf("round trip: %+v, want %+v", back.Cooldowns, c.Cooldowns)
	}
	// An older crawl.json: no per-reason keys.
	old := string(c.Marshal())
	for _, k := range []string{"forbidden_cooldown", "rate_limited_cooldown", "login_wall_cooldown"} {
		i := strings.Index(old, `"`+k+`"`)
		j := strings.Index(old[i:], "\n")
		old = old[:i] + old[i+j+1:]
	}
	old = strings.Replace(old, `"block_cooldown": "1h0m0s"`, `"block_cooldown": "2h0m0s"`, 1)
	oc, err := ParseCrawl([]byte(old))
	if err != nil {
		t.Fatalf("%v\n%s", err, old)
	}
	for _, r := range []string{ReasonForbidden, ReasonRateLimited, ReasonLoginRequired, ReasonServerErrors} {
		if got := oc.CooldownFor(DomainBlocked, r); got != 2*time.Hour {
			t.Errorf("older crawl.json: blocked %s rests %s, want its block_cooldown 2h", r, got)
		}
	}
	if err := oc.Validate(); err != nil {
		t.Errorf("older crawl.json does not validate: %v", err)
	}
	c.ForbiddenCooldown = -1
	if err := c.Validate(); err == nil {
		t.Error("negative forbidden_cooldown accepted")
	}
}
