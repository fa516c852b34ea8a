package crawl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// DomainStatus is a domain's status (seed 004 section 3.3).
type DomainStatus string

// Domain statuses.
const (
	// DomainPending: known, nothing fetched yet (or retrying after a
	// cooldown or a reset).
	DomainPending DomainStatus = "pending"
	// DomainActive: fetching; URLs remain or are in flight.
	DomainActive DomainStatus = "active"
	// DomainExhausted: every discovered URL is finished.
	DomainExhausted DomainStatus = "exhausted"
	// DomainBlocked: persistent HTTP errors (403/429/5xx), robots.txt
	// unavailable, or a refused address; retried after next_crawl_after.
	DomainBlocked DomainStatus = "blocked"
	// DomainUnreachable: repeated network failures (DNS, connect, reset,
	// timeout); retried after a longer cooldown.
	DomainUnreachable DomainStatus = "unreachable"
)

// DomainStatuses lists them in lifecycle order.
var DomainStatuses = []DomainStatus{DomainPending, DomainActive, DomainExhausted, DomainBlocked, DomainUnreachable}

// domainTransitions is the legal-transitions map of domains (seed 004
// section 7.2, plus pending -> exhausted for a domain whose every URL is
// refused before any fetch, and pending -> blocked for a robots.txt that
// cannot be fetched). A reset by an operator (any -> pending) is separate.
var domainTransitions = map[DomainStatus][]DomainStatus{
	DomainPending:     {DomainActive, DomainExhausted, DomainBlocked, DomainUnreachable},
	DomainActive:      {DomainExhausted, DomainBlocked, DomainUnreachable},
	DomainExhausted:   {DomainPending, DomainActive},
	DomainBlocked:     {DomainPending, DomainActive},
	DomainUnreachable: {DomainPending, DomainActive},
}

// ErrIllegalDomainTransition is returned for a transition not in the map.
var ErrIllegalDomainTransition = errors.New("illegal domain transition")

// CanTransitionDomain reports whether from -> to is legal. Staying in a
// status is always allowed.
func CanTransitionDomain(from, to DomainStatus) bool {
	if from == to {
		return true
	}
	for _, s := range domainTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// AdoptSeed records what seed s says of the domain it names: the best
// rank, the first source. It reports whether anything changed.
func (d *Domain) AdoptSeed(s Seed) bool {
	changed := false
	if s.Rank > 0 && (d.SeedRank == 0 || s.Rank < d.SeedRank) {
		d.SeedRank, changed = s.Rank, true
	}
	if d.Source == "" && s.Source != "" {
		d.Source, changed = s.Source, true
	}
	return changed
}

// Valid reports whether s is a known status.
func (s DomainStatus) Valid() bool { _, ok := domainTransitions[s]; return ok }

// Reason codes of a domain's status.
const (
	ReasonRobotsDenied      = "robots_denied"      // robots.txt disallows every queued URL
	ReasonRobotsUnavailable = "robots_unavailable" // robots.txt 5xx or network failure: disallow all
	ReasonRateLimited       = "rate_limited"       // 429 / 503 with Retry-After
	ReasonForbidden         = "forbidden"          // consecutive 403
	ReasonServerErrors      = "server_errors"      // consecutive 5xx
	ReasonDNSFailure        = "dns_failure"
	ReasonConnectFailure    = "connect_failure"
	ReasonTimeout           = "timeout"
	ReasonNetworkFailure    = "network_failure"
	ReasonPrivateAddress    = "private_address" // refused by the SSRF guard
	ReasonBudget            = "budget"          // per-domain budget reached
	ReasonReset             = "reset"           // reset by an operator
	ReasonCooldownOver      = "cooldown_over"   // retrying after a cooldown
	ReasonGaveUp            = "gave_up"         // blocked or unreachable too often: no more retries in this crawl
	ReasonRefresh           = "refresh"         // exhausted domain revisited (refresh round)
	// ReasonCrawlDepthReached: exhausted, with URLs of the domain found
	// only beyond the crawl's max_depth (Domain.LinksTooDeep).
	ReasonCrawlDepthReached = "crawl_depth_reached"
	// ReasonLoginRequired (cooldown.go): the domain answers with a login wall.
)

// RobotsCache is what a domain knows about the robots.txt of one origin
// (scheme://host[:port]).
type RobotsCache struct {
	Origin     string    `json:"origin"`
	FetchedAt  time.Time `json:"fetched_at"`
	HTTPStatus int       `json:"http_status"` // 0: network failure
	FinalURL   string    `json:"final_url,omitempty"`
	BodySHA256 string    `json:"body_sha256,omitempty"` // in bodies/
	BodyBytes  int64     `json:"body_bytes"`
	Error      string    `json:"error,omitempty"`
	JobID      string    `json:"job_id"`
	// Verdict: "allow_all" (4xx), "disallow_all" (5xx, network failure,
	// too many redirects), or "rules" (2xx, parsed).
	Verdict    string  `json:"verdict"`
	CrawlDelay float64 `json:"crawl_delay_seconds,omitempty"`
	Failures   int     `json:"consecutive_failures,omitempty"`
}

// Robots verdicts.
const (
	RobotsAllowAll    = "allow_all"
	RobotsDisallowAll = "disallow_all"
	RobotsRules       = "rules"
)

// Flight is a job released for a domain and not yet finished (and
// ingested by the frontier).
type Flight struct {
	ID         string    `json:"id"`
	Kind       string    `json:"kind"` // crawl.fetch or crawl.robots
	URL        string    `json:"url"`
	Origin     string    `json:"origin,omitempty"` // robots jobs
	From       string    `json:"from,omitempty"`   // fetch jobs: the referrer, at most MaxReferrerBytes
	Depth      int       `json:"depth,omitempty"`  // fetch jobs
	ReleasedAt time.Time `json:"released_at"`
	// What a retry of the URL needs (retry.go): its queue entry's place
	// (with Depth and From above) and the URL's tries so far.
	Hops     int `json:"hops,omitempty"`
	Priority int `json:"priority,omitempty"`
	Try      int `json:"try,omitempty"`      // retries released before this one (job ID suffix)
	Failures int `json:"failures,omitempty"` // failed attempts counted against the URL
	// A refresh round's validators, so that a retry stays conditional.
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	PrevSHA256   string `json:"prev_sha256,omitempty"`
	Known        bool   `json:"known,omitempty"` // a revisit of a URL with an earlier response (Entry.Known)
	RequisiteRef        // a page requisite (images.go)
}

// Segment is one queue file of a domain: the URLs discovered at one
// depth with one priority, in discovery order. Offset and Consumed say how
// far releases got; Size and Count how far the frontier had appended when
// it last wrote the domain (the file may be longer after a crash: the
// frontier recounts the tail).
type Segment struct {
	File     string `json:"file"` // <depth>_<priority>.jsonl
	Depth    int    `json:"depth"`
	Priority int    `json:"priority"`
	Offset   int64  `json:"offset"`   // bytes consumed
	Consumed int64  `json:"consumed"` // entries consumed
	Size     int64  `json:"size"`     // bytes appended
	Count    int64  `json:"count"`    // entries appended
}

// Pending is the number of entries not consumed yet.
func (s *Segment) Pending() int64 { return s.Count - s.Consumed }

// Domain is domains/<domain>.json: seed 004's domain entity within one
// crawl. The frontier is its only writer.
type Domain struct {
	Domain       string       `json:"domain"`
	ParentDomain string       `json:"parent_domain,omitempty"` // registrable domain (public suffix + 1)
	Status       DomainStatus `json:"status"`
	Reason       string       `json:"reason,omitempty"` // a Reason* code
	ReasonDetail string       `json:"reason_detail,omitempty"`
	// RegistryHold is the status the domain took from the spool's domain
	// registry when the crawl met it (registry.go, Adopt): blocked or
	// unreachable (a cooldown another crawl set) or exhausted (another
	// crawl finished it: held). It is cleared when the status changes.
	RegistryHold DomainStatus `json:"registry_hold,omitempty"`

	// SeedRank is the best rank (1 the best) of the seeds naming the
	// domain, 0 when none has one; Source where the first seed naming it
	// with a source came from. Both set when a seed is queued (a domain
	// found only by links has neither).
	SeedRank int    `json:"seed_rank,omitempty"`
	Source   string `json:"source,omitempty"`

	FirstSeenAt    time.Time  `json:"first_seen_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	LastCrawledAt  *time.Time `json:"last_crawled_at,omitempty"`
	FirstBlockedAt *time.Time `json:"first_blocked_at,omitempty"`
	// NextCrawlAfter: no request before this (cooldown of a blocked or
	// unreachable domain, Retry-After).
	NextCrawlAfter *time.Time `json:"next_crawl_after,omitempty"`
	// NextReleaseAt: politeness; the next release is not before this
	// (interval plus jitter after the last request).
	NextReleaseAt   *time.Time `json:"next_release_at,omitempty"`
	LastRequestAt   *time.Time `json:"last_request_at,omitempty"`
	CrawlDelay      float64    `json:"crawl_delay_seconds,omitempty"` // from robots.txt, capped
	IntervalSeconds float64    `json:"interval_seconds"`

	PagesDiscovered int64            `json:"pages_discovered"`
	PagesReleased   int64            `json:"pages_released"`
	PagesCrawled    int64            `json:"pages_crawled"` // finished with an HTTP response
	PagesFailed     int64            `json:"pages_failed"`  // finished with a network failure (out of attempts) or killed
	RobotsDenied    int64            `json:"robots_denied"`
	Refused         int64            `json:"refused"` // refused by the fetcher (private address, ...)
	StatusCounts    map[string]int64 `json:"status_counts,omitempty"`
	// LinksTooDeep counts the domain's URLs found only beyond the crawl's
	// max_depth: distinct (deep/ set), not queued since at a lower depth.
	// Like the seen-set it is best effort across a power cut.
	LinksTooDeep int64 `json:"links_too_deep,omitempty"`

	TotalErrorCount          int `json:"total_error_count"`
	ConsecutiveErrorCount    int `json:"consecutive_error_count"`     // 403/429/5xx in a row
	ConsecutiveNetErrorCount int `json:"consecutive_net_error_count"` // network failures in a row
	// NetErrorsSince is when the current streak of network failures
	// began (nil: no streak): an outage must last UnreachableAfter.
	NetErrorsSince *time.Time `json:"net_errors_since,omitempty"`
	Cooldowns      int        `json:"cooldowns"` // times blocked or unreachable
	// Login walls answered (loginwall.go): in all, and in a row (a 2xx
	// page that is not a login page ends the streak).
	LoginWalls            int `json:"login_walls,omitempty"`
	ConsecutiveLoginWalls int `json:"consecutive_login_walls,omitempty"`

	RobotsFetches int `json:"robots_fetches"` // robots.txt jobs released (numbers their IDs)

	// Refresh (seed 004 phase D, docs/PIPELINE.md): Round counts the
	// refreshes of the domain (0: discovery); its URL jobs' IDs carry it.
	// PagesNew counts 2xx responses with content not seen in the previous
	// round (every 2xx of round 0); PagesUnchanged the responses recorded
	// as unchanged (304, or the same body again).
	Round          int        `json:"round,omitempty"`
	RoundStartedAt *time.Time `json:"round_started_at,omitempty"`
	PagesNew       int64      `json:"pages_new"`
	PagesUnchanged int64      `json:"pages_unchanged"`
	// PagesRecrawled counts the responses, among PagesCrawled, to a
	// refresh round's revisits of URLs that had a response before:
	// PagesCrawled - PagesRecrawled pages were crawled at least once,
	// never more than PagesDiscovered.
	PagesRecrawled int64 `json:"pages_recrawled,omitempty"`

	// Images (images.go): ImagesFound counts the image URLs this domain's
	// pages referenced (each distinct URL once per page); RequisitesCrawled
	// the responses, among PagesCrawled, to page-requisite jobs of this
	// domain; ImagesStoredFor the images this domain served and stored, by
	// the domain of the page that referenced them. ImagesStored, not in
	// the file, is the images stored for this domain's pages: the sum of
	// every domain's ImagesStoredFor[this domain] (SumImagesStored).
	ImagesFound       int64            `json:"images_found,omitempty"`
	RequisitesCrawled int64            `json:"requisites_crawled,omitempty"`
	ImagesStoredFor   map[string]int64 `json:"images_stored_for,omitempty"`
	ImagesStored      int64            `json:"-"`

	Run         int   `json:"run"`          // the crawl run RunReleased counts
	RunReleased int64 `json:"run_released"` // URLs released in that run

	InFlight []Flight                `json:"in_flight"`
	Robots   map[string]*RobotsCache `json:"robots,omitempty"` // by origin
	Queue    []*Segment              `json:"queue"`
	Version  int64                   `json:"version"` // +1 per write
}

// NewDomain returns a pending domain.
func NewDomain(name, parent string, now time.Time) *Domain {
	return &Domain{Domain: name, ParentDomain: parent, Status: DomainPending, FirstSeenAt: now, UpdatedAt: now,
		StatusCounts: map[string]int64{}, Robots: map[string]*RobotsCache{}}
}

// SetStatus moves the domain to status to (with a reason code), refusing
// an illegal transition.
func (d *Domain) SetStatus(to DomainStatus, reason, detail string) error {
	if !CanTransitionDomain(d.Status, to) {
		return fmt.Errorf("domain %s: %w: %s -> %s (%s)", d.Domain, ErrIllegalDomainTransition, d.Status, to, reason)
	}
	if d.Status != to {
		d.RegistryHold = ""
	}
	d.Status, d.Reason, d.ReasonDetail = to, reason, detail
	return nil
}

// Reset puts the domain back to pending (operator reset): statuses,
// streaks and cooldowns are cleared; counters, queues and in-flight jobs
// are kept; the robots cache is dropped so robots.txt is fetched again.
func (d *Domain) Reset(now time.Time) {
	d.Status, d.Reason, d.ReasonDetail = DomainPending, ReasonReset, ""
	d.RegistryHold = ""
	d.NextCrawlAfter, d.NextReleaseAt, d.FirstBlockedAt = nil, nil, nil
	d.ConsecutiveErrorCount, d.ConsecutiveNetErrorCount, d.Cooldowns = 0, 0, 0
	d.ConsecutiveLoginWalls = 0
	d.NetErrorsSince = nil
	d.Robots = map[string]*RobotsCache{}
	d.UpdatedAt = now
}

// Pending is the number of queued URLs not released yet.
func (d *Domain) Pending() int64 {
	var n int64
	for _, s := range d.Queue {
		n += s.Pending()
	}
	return n
}

// SortQueue orders the segments: lowest depth first, then highest
// priority.
func (d *Domain) SortQueue() {
	sort.SliceStable(d.Queue, func(i, j int) bool {
		a, b := d.Queue[i], d.Queue[j]
		if a.Depth != b.Depth {
			return a.Depth < b.Depth
		}
		return a.Priority > b.Priority
	})
}

// Segment returns the segment for depth and priority, creating it.
func (d *Domain) Segment(depth, priority int) *Segment {
	for _, s := range d.Queue {
		if s.Depth == depth && s.Priority == priority {
			return s
		}
	}
	s := &Segment{File: fmt.Sprintf("%d_%d.jsonl", depth, priority), Depth: depth, Priority: priority}
	d.Queue = append(d.Queue, s)
	d.SortQueue()
	return s
}

// Marshal renders the domain's JSON.
func (d *Domain) Marshal() []byte {
	b, _ := json.MarshalIndent(d, "", "  ")
	return append(b, '\n')
}

// LoadDomain reads domains/<domain>.json.
func (st *Store) LoadDomain(domain string) (*Domain, error) {
	return readDomain(st.Path(DomainsDir, DomainFile(domain)))
}

func readDomain(path string) (*Domain, error) {
	b, err := fsq.ReadFileCapped(path, MaxStateFileSize)
	if err != nil {
		return nil, err
	}
	var d Domain
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !d.Status.Valid() {
		return nil, fmt.Errorf("%s: unknown status %q", path, d.Status)
	}
	if d.StatusCounts == nil {
		d.StatusCounts = map[string]int64{}
	}
	if d.Robots == nil {
		d.Robots = map[string]*RobotsCache{}
	}
	d.SortQueue()
	return &d, nil
}

// Domains reads every domain entity of the crawl, sorted by name.
func (st *Store) Domains() ([]*Domain, error) {
	dir := st.Path(DomainsDir)
	ents, err := readDirNames(dir)
	if err != nil {
		return nil, err
	}
	var out []*Domain
	for _, n := range ents {
		if filepath.Ext(n) != ".json" {
			continue
		}
		d, err := readDomain(filepath.Join(dir, n))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, err
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	SumImagesStored(out) // images.go
	return out, nil
}

// ScanDomains reads the domain entities of the crawl one at a time, in
// directory order, and passes each to fn, keeping none: memory stays
// bounded however many domains the crawl knows. It stops at fn's first
// error or at the first unreadable file (a file removed meanwhile is
// skipped).
func (st *Store) ScanDomains(fn func(*Domain) error) error {
	dir := st.Path(DomainsDir)
	ents, err := readDirNames(dir)
	if err != nil {
		return err
	}
	for _, n := range ents {
		if filepath.Ext(n) != ".json" {
			continue
		}
		d, err := readDomain(filepath.Join(dir, n))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

// WriteDomain writes the domain's JSON atomically. Without dirSync the
// directory is not fsynced (the caller does it once for a batch).
func (st *Store) WriteDomain(d *Domain, dirSync bool) error {
	d.Version++
	opts := []fsq.WriteOption{}
	if !dirSync {
		opts = append(opts, fsq.WithoutDirSync())
	}
	return fsq.WriteFile(st.Path(DomainsDir, DomainFile(d.Domain)), d.Marshal(), opts...)
}
