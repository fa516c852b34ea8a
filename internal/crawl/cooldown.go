package crawl

import (
	"errors"
	"time"
)

// Cooldowns per reason (seed 004 section 6.3): how long a domain rests
// once it is judged blocked or unreachable, by why. A short outage never
// gets here: its URLs are retried on the domain's backoff (retry.go);
// these apply only when a streak reaches block_threshold or
// unreachable_threshold.
const (
	DefaultLoginWallCooldown   = 30 * 24 * time.Hour // blocked, login_required
	DefaultRateLimitedCooldown = 7 * 24 * time.Hour  // blocked, rate_limited (429)
	DefaultForbiddenCooldown   = 14 * 24 * time.Hour // blocked, forbidden (403)
	DefaultUnreachableCooldown = 7 * 24 * time.Hour  // unreachable (DNS, connect, timeout)
	DefaultBlockCooldown       = time.Hour           // blocked otherwise: 5xx, robots.txt unavailable
)

// ReasonLoginRequired: the domain answers with a login wall.
const ReasonLoginRequired = "login_required"

// Cooldowns are the per-reason cooldowns a crawl adds to block_cooldown
// and unreachable_cooldown (embedded in Crawl: flat in crawl.json).
// A crawl.json written before they existed lacks them: such a crawl
// keeps resting every blocked domain block_cooldown, as it did
// (ParseCrawl). refresh_cooldown overrides, for this crawl's exhausted
// domains, the refresh interval of farroctl pipeline (0: the pipeline's).
type Cooldowns struct {
	ForbiddenCooldown   Duration `json:"forbidden_cooldown"`
	RateLimitedCooldown Duration `json:"rate_limited_cooldown"`
	LoginWallCooldown   Duration `json:"login_wall_cooldown"`
	RefreshCooldown     Duration `json:"refresh_cooldown,omitempty"`
}

// DefaultCooldowns are seed 004's.
func DefaultCooldowns() Cooldowns {
	return Cooldowns{ForbiddenCooldown: Duration(DefaultForbiddenCooldown), RateLimitedCooldown: Duration(DefaultRateLimitedCooldown),
		LoginWallCooldown: Duration(DefaultLoginWallCooldown)}
}

// unset marks a cooldown absent from crawl.json while it is parsed.
const unset = Duration(-1)

func (c *Cooldowns) markUnset() {
	c.ForbiddenCooldown, c.RateLimitedCooldown, c.LoginWallCooldown = unset, unset, unset
}

// inherit gives the cooldowns crawl.json lacks the value block_cooldown
// had for them before they existed.
func (c *Cooldowns) inherit(block Duration) {
	for _, p := range []*Duration{&c.ForbiddenCooldown, &c.RateLimitedCooldown, &c.LoginWallCooldown} {
		if *p == unset {
			*p = block
		}
	}
}

// Validate checks the cooldowns.
func (c Cooldowns) Validate() error {
	if c.ForbiddenCooldown < 0 || c.RateLimitedCooldown < 0 || c.LoginWallCooldown < 0 || c.RefreshCooldown < 0 {
		return errors.New("cooldowns must not be negative")
	}
	return nil
}

// CooldownFor is how long a domain judged to (blocked or unreachable)
// for reason rests; 0 means it is given up at once.
func (c *Crawl) CooldownFor(to DomainStatus, reason string) time.Duration {
	if to == DomainUnreachable {
		return c.UnreachableCooldown.D()
	}
	switch reason {
	case ReasonForbidden:
		return c.ForbiddenCooldown.D()
	case ReasonRateLimited:
		return c.RateLimitedCooldown.D()
	case ReasonLoginRequired:
		return c.LoginWallCooldown.D()
	}
	return c.BlockCooldown.D()
}
