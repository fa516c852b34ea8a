package crawl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// FetchPrompt is the prompt.json of a crawl.fetch job. Everything the
// fetcher needs is in it: the fetcher reads no crawl configuration.
type FetchPrompt struct {
	Crawl            string            `json:"crawl"`
	URL              string            `json:"url"` // normalized
	Domain           string            `json:"domain"`
	Depth            int               `json:"depth"`
	Hops             int               `json:"hops,omitempty"` // redirects followed to reach this URL
	DiscoveredFrom   string            `json:"discovered_from,omitempty"`
	UserAgent        string            `json:"user_agent"`
	TimeoutMS        int64             `json:"timeout_ms"`
	ConnectTimeoutMS int64             `json:"connect_timeout_ms"`
	MaxBodyBytes     int64             `json:"max_body_bytes"`
	Resolve          map[string]string `json:"resolve,omitempty"`
	AllowPrivate     bool              `json:"allow_private"`
	// MinIntervalMS: the fetcher waits until this long after the last
	// request to the domain by anyone (the spool's politeness gate,
	// internal/politeness). MaxInFlightPerDomain: it starts only while
	// fewer requests to the domain, by anyone, are under way (0: no cap).
	MinIntervalMS        int64 `json:"min_interval_ms"`
	MaxInFlightPerDomain int   `json:"max_in_flight_per_domain,omitempty"`
	// Robots: the robots.txt the frontier checked the URL against; the
	// fetcher checks again. Nil when the crawl ignores robots.txt.
	Robots *RobotsRef `json:"robots,omitempty"`
	// Refresh rounds (docs/PIPELINE.md): Round is the domain's refresh
	// round (0: discovery). IfNoneMatch and IfModifiedSince are sent as
	// conditional request headers; a 304, or a body whose SHA-256 is
	// PrevSHA256, is recorded as unchanged and its body is not stored
	// again.
	Round           int    `json:"round,omitempty"`
	IfNoneMatch     string `json:"if_none_match,omitempty"`
	IfModifiedSince string `json:"if_modified_since,omitempty"`
	PrevSHA256      string `json:"prev_sha256,omitempty"`
	FetchFilters           // content types, robots meta switches (filter.go)
	// A page requisite (images.go): its links are not extracted.
	// PageRequisites: the kinds whose URLs a page's artifact lists besides
	// its images (css, scripts).
	RequisiteRef
	PageRequisites []string `json:"page_requisites,omitempty"`
}

// RobotsRef names a stored robots.txt.
type RobotsRef struct {
	Origin     string `json:"origin"`
	Verdict    string `json:"verdict"`
	HTTPStatus int    `json:"http_status"`
	BodySHA256 string `json:"body_sha256,omitempty"`
}

// RobotsPrompt is the prompt.json of a crawl.robots job.
type RobotsPrompt struct {
	Crawl            string            `json:"crawl"`
	Origin           string            `json:"origin"` // scheme://host[:port]
	Domain           string            `json:"domain"`
	UserAgent        string            `json:"user_agent"`
	TimeoutMS        int64             `json:"timeout_ms"`
	ConnectTimeoutMS int64             `json:"connect_timeout_ms"`
	MaxBytes         int64             `json:"max_bytes"`
	Resolve          map[string]string `json:"resolve,omitempty"`
	AllowPrivate     bool              `json:"allow_private"`
	MinIntervalMS    int64             `json:"min_interval_ms"`
	// MaxInFlightPerDomain as in FetchPrompt.
	MaxInFlightPerDomain int `json:"max_in_flight_per_domain,omitempty"`
	// Sitemaps: read the origin's sitemaps after robots.txt (sitemap.go),
	// spaced by MinIntervalMS raised to robots.txt's Crawl-delay capped at
	// MaxCrawlDelayMS.
	Sitemaps        bool  `json:"sitemaps,omitempty"`
	MaxCrawlDelayMS int64 `json:"max_crawl_delay_ms,omitempty"`
}

// Outcomes of a fetch, in Artifact.Outcome.
const (
	OutcomeFetched      = "fetched"       // an HTTP response, whatever its status
	OutcomeNetworkError = "network_error" // http_status 0: DNS, connect, reset, timeout; retried
	OutcomeRefused      = "refused"       // not attempted: private address, robots, unsupported
	// Only in the outcome log:
	OutcomeFailed       = "failed"        // network errors until out of attempts
	OutcomeKilled       = "killed"        // cancelled or killed by an operator
	OutcomeRobotsDenied = "robots_denied" // dropped at release: robots.txt disallows it
	// OutcomePrivateAddress: refused by the SSRF guard (the artifact says
	// refused, error_code private_address).
	OutcomePrivateAddress = "private_address"
)

// Error codes of artifacts.
const (
	ErrCodeDNS       = ReasonDNSFailure
	ErrCodeConnect   = ReasonConnectFailure
	ErrCodeTimeout   = ReasonTimeout
	ErrCodeNetwork   = ReasonNetworkFailure
	ErrCodePrivate   = ReasonPrivateAddress
	ErrCodeRobots    = ReasonRobotsDenied
	ErrCodeTooLarge  = "too_large" // body over the cap: truncated, still fetched
	ErrCodeBadURL    = "bad_url"
	ErrCodeRedirects = "too_many_redirects"
)

// Artifact is the result.json a crawl.fetch job leaves in its directory.
type Artifact struct {
	Kind          string            `json:"kind"` // crawl.fetch
	Crawl         string            `json:"crawl"`
	JobID         string            `json:"job_id"`
	NormalizedURL string            `json:"normalized_url"`
	FinalURL      string            `json:"final_url"` // the URL that answered (redirects are not followed)
	Domain        string            `json:"domain"`
	Depth         int               `json:"depth"`
	Hops          int               `json:"hops,omitempty"`
	Attempt       int               `json:"attempt"`
	Outcome       string            `json:"outcome"`
	HTTPStatus    int               `json:"http_status"` // 0: network failure
	Headers       map[string]string `json:"headers,omitempty"`
	ContentType   string            `json:"content_type,omitempty"`
	BodyBytes     int64             `json:"body_bytes"`
	Truncated     bool              `json:"truncated,omitempty"`
	SHA256        string            `json:"sha256,omitempty"` // of the stored body: bodies/<ab>/<sha256>
	FetchedAt     time.Time         `json:"fetched_at"`       // when the request was sent
	DurationMS    int64             `json:"duration_ms"`
	RedirectTo    string            `json:"redirect_to,omitempty"` // 3xx Location, resolved
	RetryAfter    float64           `json:"retry_after_seconds,omitempty"`
	Links         []string          `json:"links"`
	Error         string            `json:"error,omitempty"`
	ErrorCode     string            `json:"error_code,omitempty"`
	// Round is the domain's refresh round the fetch belongs to; Unchanged
	// says the server answered 304 to a conditional request or sent the
	// body it sent last time (SHA256 is then the previous body's).
	Round     int  `json:"round,omitempty"`
	Unchanged bool `json:"unchanged,omitempty"`
	// Exchange is the request and response as sent and received (for
	// WARC export); nil for a fetch that got no response.
	Exchange *Exchange `json:"exchange,omitempty"`
	// LoginWall says the response is a login wall (loginwall.go):
	// LoginWallRedirect or LoginWallForm; empty otherwise.
	LoginWall string `json:"login_wall,omitempty"`

	PageDirectives // noindex, nofollow (filter.go)
	PageImages     // images and other requisites referenced (images.go)
}

// RobotsArtifact is the result.json of a crawl.robots job.
type RobotsArtifact struct {
	Kind       string    `json:"kind"` // crawl.robots
	Crawl      string    `json:"crawl"`
	JobID      string    `json:"job_id"`
	Origin     string    `json:"origin"`
	FinalURL   string    `json:"final_url,omitempty"`
	Redirects  int       `json:"redirects"`
	HTTPStatus int       `json:"http_status"` // 0: network failure
	Verdict    string    `json:"verdict"`     // allow_all, disallow_all, rules
	BodySHA256 string    `json:"body_sha256,omitempty"`
	BodyBytes  int64     `json:"body_bytes"`
	Truncated  bool      `json:"truncated,omitempty"`
	FetchedAt  time.Time `json:"fetched_at"`
	DurationMS int64     `json:"duration_ms"`
	Error      string    `json:"error,omitempty"`
	ErrorCode  string    `json:"error_code,omitempty"`
	// The sitemaps read after robots.txt and the URLs they list.
	Sitemaps    []SitemapFetch `json:"sitemaps,omitempty"`
	SitemapURLs []SitemapURL   `json:"sitemap_urls,omitempty"`
}

// ReadResult decodes dir/result.json into v. A missing file matches
// fs.ErrNotExist.
func ReadResult(dir string, v any) error {
	b, err := fsq.ReadFileCapped(filepath.Join(dir, job.ResultFile), MaxResultFileSize)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, job.ResultFile), err)
	}
	return nil
}

// WriteResult writes dir/result.json durably.
func WriteResult(dir string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return fsq.WriteFile(filepath.Join(dir, job.ResultFile), append(b, '\n'))
}

// StageResult stages dir/result.json (fsq.Stage): the caller makes it
// durable with a barrier (job.Spool.Sync), then puts it in place.
func StageResult(dir string, v any) (*fsq.Staged, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return fsq.Stage(filepath.Join(dir, job.ResultFile), append(b, '\n'))
}

// Outcome is one line of outcomes.jsonl: a URL finished (or dropped at
// release), as the frontier recorded it.
type Outcome struct {
	Time       time.Time  `json:"time"`
	URL        string     `json:"url"`
	Domain     string     `json:"domain"`
	JobID      string     `json:"job_id,omitempty"`
	Depth      int        `json:"depth"`
	Referrer   string     `json:"referrer,omitempty"` // the page the URL was found on ("" for seeds)
	Outcome    string     `json:"outcome"`
	HTTPStatus int        `json:"http_status"`
	FetchedAt  *time.Time `json:"fetched_at,omitempty"`
	SHA256     string     `json:"sha256,omitempty"`
	Links      int        `json:"links"`
	Detail     string     `json:"detail,omitempty"` // error, robots rule, reason
	// ErrorCode: the fetcher's code of a refusal (robots_disallowed, ...),
	// which tells a robots refusal from others in a recount.
	ErrorCode string `json:"error_code,omitempty"`
	// Validators of the response (a refresh sends them back) and whether
	// it was unchanged since the previous round.
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	Unchanged    bool   `json:"unchanged,omitempty"`
	Round        int    `json:"round,omitempty"`
	// Recrawl: a refresh round's response for a URL that had one before
	// (counted in the domain's pages_recrawled).
	Recrawl bool `json:"recrawl,omitempty"`
	PageDirectives
	// A page requisite's kind and page domain, a page's images_found, an
	// image stored (images.go).
	RequisiteRef
	ImageOutcome
}

// ScanOutcomes calls fn for every line of outcomes.jsonl (a torn last
// line is skipped). fn returning false stops.
func (st *Store) ScanOutcomes(fn func(o *Outcome) bool) error {
	return st.scanJSONLines(OutcomesFile, func(line []byte) bool {
		var o Outcome
		if json.Unmarshal(line, &o) != nil {
			return true
		}
		return fn(&o)
	})
}

// scanJSONLines calls fn for every complete line of the crawl's file name
// (a torn last line is skipped) until fn returns false. The file is
// opened without following a symlink or waiting on a FIFO (fsq.OpenRegular):
// a hostile entry is an error, never a blocked frontier. A missing file has
// no lines.
func (st *Store) scanJSONLines(name string, fn func(line []byte) bool) error {
	f, _, err := fsq.OpenRegular(st.Path(name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' && !fn(line) {
			return nil
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// BodyPath is where a body with this SHA-256 (hex) is stored.
func (st *Store) BodyPath(sha string) string {
	if len(sha) < 2 {
		return st.Path(BodiesDir, "_", sha)
	}
	return st.Path(BodiesDir, sha[:2], sha)
}

// StageBody stages body at its content address (fsq.Stage), or returns
// nil when a copy is there already. The caller makes it durable with a
// barrier (job.Spool.Sync) before it puts it in place.
func (st *Store) StageBody(sha string, body []byte) (*fsq.Staged, error) {
	p := st.BodyPath(sha)
	if _, err := os.Lstat(p); err == nil {
		return nil, nil
	}
	if err := fsq.MkdirDurable(filepath.Dir(p)); err != nil {
		return nil, err
	}
	return fsq.Stage(p, body)
}

// PutBody stores body content-addressed (durably; an existing copy is
// kept) and returns nothing else: the caller computed sha.
func (st *Store) PutBody(sha string, body []byte) error {
	p := st.BodyPath(sha)
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	if err := fsq.MkdirDurable(filepath.Dir(p)); err != nil {
		return err
	}
	return fsq.WriteFile(p, body)
}

// Frontier is frontier.json: the frontier's own progress in a crawl.
// Its link counters are a cache of what links.jsonl and the queues say,
// written at most once a second and rebuilt when a frontier starts.
type Frontier struct {
	Seeded bool `json:"seeded"` // the seeds of crawl.json are queued
	// Tallied: the link counters below are derived from links.jsonl and
	// the queues at every frontier start (crawl.Recount); false for a
	// crawl seeded before links.jsonl existed, whose counters are kept.
	Tallied    bool      `json:"tallied,omitempty"`
	OutOfScope int64     `json:"out_of_scope"` // links dropped: out of scope
	TooDeep    int64     `json:"too_deep"`     // links dropped: beyond max_depth
	TooManyHop int64     `json:"too_many_redirects"`
	Invalid    int64     `json:"invalid"`    // links that do not normalize (other schemes, bad syntax)
	Duplicates int64     `json:"duplicates"` // links already seen
	Filtered   int64     `json:"filtered"`   // links dropped by a URL filter
	UpdatedAt  time.Time `json:"updated_at"`

	// PendingURLs is the crawl's URLs queued and not released yet, summed
	// over its domains by the frontier (at most a second or two old while
	// a frontier drives the crawl; its last count once none does).
	PendingURLs int64 `json:"pending_urls"`
}

// LoadFrontier reads frontier.json (zero value if missing).
func (st *Store) LoadFrontier() (*Frontier, error) {
	var f Frontier
	b, err := fsq.ReadFileCapped(st.Path(FrontierFile), MaxStateFileSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &f, nil
		}
		return nil, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", st.Path(FrontierFile), err)
	}
	return &f, nil
}

// WriteFrontier writes frontier.json durably.
func (st *Store) WriteFrontier(f *Frontier) error {
	f.UpdatedAt = time.Now().UTC()
	b, _ := json.MarshalIndent(f, "", "  ")
	return fsq.WriteFile(st.Path(FrontierFile), append(b, '\n'))
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := names[:0]
	for _, n := range names {
		if len(n) > 0 && n[0] != '.' {
			out = append(out, n)
		}
	}
	return out, nil
}
