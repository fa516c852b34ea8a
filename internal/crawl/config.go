package crawl

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/farro-dev/farro/internal/urlnorm"
)

// SchemaVersion is the crawl.json schema this build understands.
const SchemaVersion = "1"

// State is a crawl's state.
type State string

// Crawl states. running releases URLs; paused releases nothing (jobs in
// flight finish and their links are queued); cancelled released nothing more
// and had its queued jobs killed; done has nothing left to do.
const (
	Running   State = "running"
	Paused    State = "paused"
	Cancelled State = "cancelled"
	Done      State = "done"
)

// Scope says which discovered URLs belong to a crawl.
type Scope string

// Scopes: the seeds' hosts (canonical domain: "www." folded, default port
// dropped), their registrable domains (public suffix + 1, subdomains
// included), or URLs starting with a seed URL.
const (
	ScopeHost   Scope = "host"
	ScopeDomain Scope = "domain"
	ScopePrefix Scope = "prefix"
)

// Duration is a time.Duration written as a Go duration string ("1.5s").
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string, or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var f float64
		if err2 := json.Unmarshal(b, &f); err2 != nil {
			return fmt.Errorf("duration: %w", err)
		}
		*d = Duration(f * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Normalization holds the optional URL normalization rules (urlnorm's
// Options), all off by default.
type Normalization struct {
	SortQuery      bool `json:"sort_query"`
	StripWWW       bool `json:"strip_www"`
	LowercasePath  bool `json:"lowercase_path"`
	DropEmptyQuery bool `json:"drop_empty_query"`
}

// Options converts to urlnorm.Options.
func (n Normalization) Options() urlnorm.Options {
	return urlnorm.Options{SortQuery: n.SortQuery, StripWWW: n.StripWWW, LowercasePath: n.LowercasePath, DropEmptyQuery: n.DropEmptyQuery}
}

// Seed is a start URL.
type Seed struct {
	URL      string `json:"url"`
	Priority int    `json:"priority,omitempty"`
	// Rank is the seed's place in a ranked list of domains (1 the best;
	// 0 none): its domain's seed_rank, a term of its priority score.
	Rank int `json:"rank,omitempty"`
	// Source names where the seed came from (a list and its version,
	// say "tranco_20260205"): its domain's source.
	Source string `json:"source,omitempty"`
}

// MaxSourceLen bounds a seed's source name.
const MaxSourceLen = 100

// ValidSeedSource reports whether src may name a seed's source: at most
// MaxSourceLen printable ASCII characters, no spaces.
func ValidSeedSource(src string) bool {
	if len(src) > MaxSourceLen {
		return false
	}
	for i := 0; i < len(src); i++ {
		if src[i] <= ' ' || src[i] > '~' {
			return false
		}
	}
	return true
}

// Crawl is crawl.json: a crawl's configuration and its state.
type Crawl struct {
	SchemaVersion string `json:"schema_version"`
	Name          string `json:"name"`
	Seeds         []Seed `json:"seeds"`
	Scope         Scope  `json:"scope"`
	MaxDepth      int    `json:"max_depth"`

	// Budgets (0: unlimited): URL fetch jobs released, in total, per
	// domain, per run, per domain per run. A run starts with crawl start
	// and with every resume; reaching a per-run budget pauses the crawl.
	MaxPages                int64 `json:"max_pages"`
	MaxPagesPerDomain       int64 `json:"max_pages_per_domain"`
	MaxPagesPerRun          int64 `json:"max_pages_per_run"`
	MaxPagesPerDomainPerRun int64 `json:"max_pages_per_domain_per_run"`

	// Politeness.
	Delay                Duration `json:"delay"`           // minimum interval between two requests to a domain
	Jitter               Duration `json:"jitter"`          // random [0, jitter) added to every interval
	MaxCrawlDelay        Duration `json:"max_crawl_delay"` // cap on robots.txt Crawl-delay and Retry-After
	MaxInFlightPerDomain int      `json:"max_in_flight_per_domain"`
	MaxInFlight          int      `json:"max_in_flight"` // released and unfinished jobs of the crawl, all domains
	UserAgent            string   `json:"user_agent"`
	ObeyRobots           bool     `json:"obey_robots"`
	RobotsTTL            Duration `json:"robots_ttl"`
	Sitemaps             bool     `json:"sitemaps"` // read robots.txt's sitemaps (or /sitemap.xml) for URLs

	// Fetching.
	AllowPrivate   bool              `json:"allow_private"`     // allow private, loopback and link-local addresses
	Resolve        map[string]string `json:"resolve,omitempty"` // "host:port" -> address, as curl --resolve
	Timeout        Duration          `json:"timeout"`
	ConnectTimeout Duration          `json:"connect_timeout"`
	MaxBodyBytes   int64             `json:"max_body_bytes"`
	MaxAttempts    int               `json:"max_attempts"`  // per URL job; 0: managerd's default
	MaxRedirects   int               `json:"max_redirects"` // redirect hops followed from one discovered URL
	Normalize      Normalization     `json:"normalize"`
	Filters                          // URL and content-type filters, robots meta (filter.go)
	// PageRequisites: images, css, scripts fetched as URL jobs (images.go).
	PageRequisites []string `json:"page_requisites,omitempty"`

	// Domain error handling (seed 004).
	BlockThreshold       int      `json:"block_threshold"`       // consecutive 403/429/5xx before blocked
	BlockCooldown        Duration `json:"block_cooldown"`        // blocked -> pending after this
	UnreachableThreshold int      `json:"unreachable_threshold"` // consecutive network failures before unreachable
	UnreachableCooldown  Duration `json:"unreachable_cooldown"`
	// UnreachableAfter is how long a streak of network failures must
	// last, besides reaching UnreachableThreshold, before the domain is
	// judged unreachable (outage.go); 0: the threshold alone (crawls
	// written before it existed).
	UnreachableAfter Duration `json:"unreachable_after,omitempty"`
	MaxDomainRetries int      `json:"max_domain_retries"` // cooldowns before a domain stays blocked for this crawl
	Cooldowns                 // per reason (cooldown.go)
	// Outages (retry.go): the first and the longest wait before a
	// domain's next request after a failed one (0: the defaults).
	RetryBackoff    Duration `json:"retry_backoff,omitempty"`
	RetryBackoffMax Duration `json:"retry_backoff_max,omitempty"`

	// State.
	State       State      `json:"state"`
	StateReason string     `json:"state_reason,omitempty"`
	Run         int        `json:"run"` // 1 at start, +1 per resume
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	RunStarted  time.Time  `json:"run_started_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
}

// Defaults used by New and by farroctl's flags.
const (
	DefaultUserAgent   = "farro-crawler/0.1 (+https://github.com/farro-dev/farro)"
	DefaultMaxDepth    = 3
	DefaultDelay       = time.Second
	DefaultMaxInFlight = 64
	// MinRobotsBytes is the least of a robots.txt that is parsed (RFC
	// 9309 section 2.5 asks for at least 500 KiB).
	MinRobotsBytes = 500 << 10
)

// New returns a crawl with the defaults filled in; the caller sets Name,
// Seeds and what it wants to change, then calls Validate.
func New(name string) *Crawl {
	return &Crawl{
		SchemaVersion: SchemaVersion, Name: name, Scope: ScopeHost, MaxDepth: DefaultMaxDepth,
		Delay: Duration(DefaultDelay), MaxCrawlDelay: Duration(30 * time.Second),
		MaxInFlightPerDomain: 1, MaxInFlight: DefaultMaxInFlight,
		UserAgent: DefaultUserAgent, ObeyRobots: true, RobotsTTL: Duration(24 * time.Hour), Sitemaps: true,
		Timeout: Duration(30 * time.Second), ConnectTimeout: Duration(10 * time.Second),
		MaxBodyBytes: 10 << 20, MaxRedirects: 5,
		BlockThreshold: 5, BlockCooldown: Duration(DefaultBlockCooldown),
		UnreachableThreshold: 3, UnreachableCooldown: Duration(DefaultUnreachableCooldown),
		UnreachableAfter: Duration(DefaultUnreachableAfter),
		Cooldowns:        DefaultCooldowns(),
		MaxDomainRetries: 3,
		State:            Running, Run: 1,
	}
}

// Compiled on first use: a package's initialisation runs at every start
// of every program that links it (farroctl --version included).
var namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`) })

// ValidateName checks a crawl name: a letter or digit, then up to 63
// letters, digits, '_' or '-' (a subset of the job ID alphabet, so that
// job IDs derived from it are valid).
func ValidateName(name string) error {
	if !namePattern().MatchString(name) {
		return fmt.Errorf("invalid crawl name %q: must match %s", name, namePattern())
	}
	return nil
}

// Validate checks the configuration and normalizes the seeds in place.
func (c *Crawl) Validate() error {
	if err := ValidateName(c.Name); err != nil {
		return err
	}
	if c.SchemaVersion == "" {
		c.SchemaVersion = SchemaVersion
	}
	if c.SchemaVersion != SchemaVersion {
		return fmt.Errorf("crawl %s: schema_version %q not understood (this build: %q)", c.Name, c.SchemaVersion, SchemaVersion)
	}
	if len(c.Seeds) == 0 {
		return errors.New("a crawl needs at least one seed URL")
	}
	for i, s := range c.Seeds {
		n, err := urlnorm.Normalize(s.URL, c.Normalize.Options())
		if err != nil {
			return fmt.Errorf("seed %q: %w", s.URL, err)
		}
		if s.Rank < 0 {
			return fmt.Errorf("seed %q: rank %d: must be 1 or more (0: none)", s.URL, s.Rank)
		}
		if !ValidSeedSource(s.Source) {
			return fmt.Errorf("seed %q: source %q: at most %d printable characters, no spaces", s.URL, s.Source, MaxSourceLen)
		}
		c.Seeds[i].URL = n
	}
	switch c.Scope {
	case ScopeHost, ScopeDomain, ScopePrefix:
	default:
		return fmt.Errorf("scope %q: must be host, domain or prefix", c.Scope)
	}
	switch {
	case c.MaxDepth < 0:
		return errors.New("max depth must not be negative")
	case c.MaxPages < 0 || c.MaxPagesPerDomain < 0 || c.MaxPagesPerRun < 0 || c.MaxPagesPerDomainPerRun < 0:
		return errors.New("budgets must not be negative (0: unlimited)")
	case c.Delay < 0 || c.Jitter < 0 || c.MaxCrawlDelay < 0:
		return errors.New("delay, jitter and max crawl delay must not be negative")
	case c.MaxInFlightPerDomain < 1:
		return errors.New("max in flight per domain must be at least 1")
	case c.MaxInFlight < 1:
		return errors.New("max in flight must be at least 1")
	case strings.TrimSpace(c.UserAgent) == "" || strings.ContainsAny(c.UserAgent, "\r\n"):
		return errors.New("user agent must be one non-empty line")
	case c.Timeout <= 0 || c.ConnectTimeout <= 0:
		return errors.New("timeouts must be positive")
	case c.MaxBodyBytes <= 0:
		return errors.New("max body bytes must be positive")
	case c.MaxAttempts < 0:
		return errors.New("max attempts must not be negative")
	case c.MaxRedirects < 0:
		return errors.New("max redirects must not be negative")
	case c.BlockThreshold < 1 || c.UnreachableThreshold < 1:
		return errors.New("block and unreachable thresholds must be at least 1")
	case c.RetryBackoff < 0 || c.RetryBackoffMax < 0:
		return errors.New("retry backoffs must not be negative")
	case c.BlockCooldown < 0 || c.UnreachableCooldown < 0 || c.UnreachableAfter < 0 || c.MaxDomainRetries < 0:
		return errors.New("cooldowns and domain retries must not be negative")
	case c.RobotsTTL <= 0 || c.RobotsTTL.D() > 24*time.Hour:
		return errors.New("robots TTL must be positive and at most 24h (RFC 9309)")
	}
	if err := c.Cooldowns.Validate(); err != nil {
		return err
	}
	if err := c.Filters.Validate(c.Normalize.Options()); err != nil {
		return err
	}
	if err := c.validatePageRequisites(); err != nil { // images.go
		return err
	}
	for hp, addr := range c.Resolve {
		if err := ValidateResolve(hp, addr); err != nil {
			return err
		}
	}
	switch c.State {
	case Running, Paused, Cancelled, Done:
	default:
		return fmt.Errorf("state %q unknown", c.State)
	}
	return nil
}

// ParseResolve parses one --resolve HOST:PORT:ADDR entry (as curl's; ADDR
// may be an IPv6 address in brackets).
func ParseResolve(s string) (hostPort, addr string, err error) {
	host, rest, ok := strings.Cut(s, ":")
	if !ok {
		return "", "", fmt.Errorf("--resolve %q: want HOST:PORT:ADDR", s)
	}
	port, addr, ok := strings.Cut(rest, ":")
	if !ok {
		return "", "", fmt.Errorf("--resolve %q: want HOST:PORT:ADDR", s)
	}
	addr = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
	hostPort = strings.ToLower(host) + ":" + port
	return hostPort, addr, ValidateResolve(hostPort, addr)
}

// ValidateResolve checks one entry of the resolve map.
func ValidateResolve(hostPort, addr string) error {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" {
		return fmt.Errorf("resolve %q: want HOST:PORT", hostPort)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("resolve %q: bad port", hostPort)
	}
	if net.ParseIP(addr) == nil {
		return fmt.Errorf("resolve %q: %q is not an IP address", hostPort, addr)
	}
	return nil
}

// Interval is the minimum time between two requests to a domain whose
// robots.txt asks for crawlDelay: the crawl's delay, or the Crawl-delay
// capped at MaxCrawlDelay when that is longer.
func (c *Crawl) Interval(crawlDelay time.Duration) time.Duration {
	d := c.Delay.D()
	if crawlDelay > c.MaxCrawlDelay.D() {
		crawlDelay = c.MaxCrawlDelay.D()
	}
	return max(d, crawlDelay)
}

// Marshal renders crawl.json.
func (c *Crawl) Marshal() []byte {
	b, _ := json.MarshalIndent(c, "", "  ")
	return append(b, '\n')
}

// ParseCrawl decodes crawl.json.
func ParseCrawl(data []byte) (*Crawl, error) {
	var c Crawl
	c.Cooldowns.markUnset()
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("crawl.json: %w", err)
	}
	c.Cooldowns.inherit(c.BlockCooldown) // cooldown.go
	if c.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("crawl.json: schema_version %q not understood (this build: %q)", c.SchemaVersion, SchemaVersion)
	}
	if err := ValidateName(c.Name); err != nil {
		return nil, fmt.Errorf("crawl.json: %w", err)
	}
	return &c, nil
}

// StartRun makes the crawl running again as a new run (Run numbers it,
// RunStarted dates it): a done crawl that has work again, or a paused one
// resumed.
func (c *Crawl) StartRun(now time.Time) {
	c.State, c.StateReason = Running, ""
	c.Run++
	c.RunStarted = now.UTC()
	c.FinishedAt = nil
}
