// Package source is the content pipeline's registry of monitored sources
// (seed 003): one JSON file per source in <spool>/sources/, written
// atomically (pkg/fsq) under the source's flock, holding what to check
// (URL, interval), how to acquire it (the crawl's scope and budgets) and
// the state of its checks (validators, content hash, failures, schedule).
// The files are the truth: farroctl, the source.check handler (agentd)
// and the pipeline's acquire step all read and change them under the
// same lock. See docs/PIPELINE.md.
package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// Dir is the spool directory of the sources.
const Dir = "sources"

// SchemaVersion is the source file schema this build understands.
const SchemaVersion = "1"

// MaxFileSize caps the read of sources/<name>.json (a few fields): a
// bigger file is refused (fsq.ErrTooLarge), never loaded.
const MaxFileSize = 1 << 20

// CrawlPrefix names a source's crawl: "src-<source name>".
const CrawlPrefix = "src-"

// Defaults (seed 003's PipelinePoliteness).
const (
	DefaultEvery       = 7 * 24 * time.Hour
	DefaultBackoffBase = 6 * time.Hour
	DefaultBackoffMax  = 7 * 24 * time.Hour
	DefaultJitter      = time.Hour
)

// Outcome is the result of a check.
type Outcome string

// Outcomes of a check.
const (
	Unchanged Outcome = "unchanged" // 304, or the same normalized content
	Changed   Outcome = "changed"   // different content: acquire it again
	First     Outcome = "first"     // never acquired: acquire it
	Failed    Outcome = "failed"    // network error or a non-2xx/304 answer: back off
)

// ErrNotFound: no source of that name.
var ErrNotFound = errors.New("no such source")

// ErrExists: a source of that name exists.
var ErrExists = errors.New("source exists")

// Source is sources/<name>.json.
type Source struct {
	SchemaVersion string `json:"schema_version"`
	Name          string `json:"name"`
	URL           string `json:"url"`    // normalized
	Domain        string `json:"domain"` // canonical domain of URL: checks are grouped by it
	Crawl         string `json:"crawl"`  // the crawl that acquires it: src-<name>

	// Schedule and policy.
	Every       crawl.Duration `json:"every"`        // check interval
	BackoffBase crawl.Duration `json:"backoff_base"` // first failure: next check after this; doubles per failure
	BackoffMax  crawl.Duration `json:"backoff_max"`  // cap of the failure backoff
	Jitter      crawl.Duration `json:"jitter"`       // every next check gets [0, min(jitter, every/4)) more

	// Acquisition: the crawl's scope and budgets.
	Scope        crawl.Scope       `json:"scope"`
	MaxDepth     int               `json:"max_depth"`
	MaxPages     int64             `json:"max_pages"` // URL jobs per acquisition (the crawl's max_pages_per_run); 0: unlimited
	Delay        crawl.Duration    `json:"delay"`     // the crawl's interval between requests to a domain
	UserAgent    string            `json:"user_agent"`
	AllowPrivate bool              `json:"allow_private"`
	Resolve      map[string]string `json:"resolve,omitempty"`
	Timeout      crawl.Duration    `json:"timeout"`

	// State of the checks.
	CreatedAt           time.Time  `json:"created_at"`
	UpdatedAt           time.Time  `json:"updated_at"`
	NextCheckAfter      *time.Time `json:"next_check_after,omitempty"` // nil: due now (never checked)
	LastCheckedAt       *time.Time `json:"last_checked_at,omitempty"`
	LastOutcome         Outcome    `json:"last_outcome,omitempty"`
	LastHTTPStatus      int        `json:"last_http_status,omitempty"`
	LastError           string     `json:"last_error,omitempty"`
	ETag                string     `json:"etag,omitempty"`
	LastModified        string     `json:"last_modified,omitempty"`
	ContentHash         string     `json:"content_hash,omitempty"` // sha256 of the normalized body of the last 2xx
	ConsecutiveFailures int        `json:"consecutive_failures"`
	Checks              int        `json:"checks"`
	LastChangedAt       *time.Time `json:"last_changed_at,omitempty"`
	// Deferred says why the last check made no request (its domain
	// blocked or unreachable in the domain registry, cooldown not over:
	// next_check_after is then the cooldown's end); cleared by the next
	// check that makes one.
	Deferred string `json:"deferred,omitempty"`

	// Acquisition state. AcquirePending is set with the check that found
	// the source first or changed, and cleared once its crawl is started
	// or asked to refresh, so an acquisition interrupted by a crash is
	// done by the next one (check job retry or farroctl pipeline acquire).
	AcquirePending      bool       `json:"acquire_pending"`
	AcquirePendingSince *time.Time `json:"acquire_pending_since,omitempty"`
	LastAcquiredAt      *time.Time `json:"last_acquired_at,omitempty"`
	Acquisitions        int        `json:"acquisitions"`
	Version             int64      `json:"version"`
}

// Compiled on first use: a package's initialisation runs at every start
// of every program that links it (farroctl --version included).
var namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,59}$`) })

// ValidateName checks a source name: a letter or digit, then up to 59
// letters, digits, '_' or '-' (no '/', no '.', so no "..", no hidden
// names; short enough that its crawl's name, src-<name>, is valid).
func ValidateName(name string) error {
	if !namePattern().MatchString(name) {
		return fmt.Errorf("invalid source name %q: must match %s", name, namePattern())
	}
	return nil
}

// New returns a source with the defaults filled in.
func New(name, rawURL string) *Source {
	return &Source{
		SchemaVersion: SchemaVersion, Name: name, URL: rawURL, Crawl: CrawlPrefix + name,
		Every: crawl.Duration(DefaultEvery), BackoffBase: crawl.Duration(DefaultBackoffBase),
		BackoffMax: crawl.Duration(DefaultBackoffMax), Jitter: crawl.Duration(DefaultJitter),
		Scope: crawl.ScopeHost, MaxDepth: crawl.DefaultMaxDepth, Delay: crawl.Duration(crawl.DefaultDelay),
		UserAgent: crawl.DefaultUserAgent, Timeout: crawl.Duration(30 * time.Second),
	}
}

// NameFromURL derives a default name from a URL: its host and path with
// anything outside the name alphabet turned into '-'.
func NameFromURL(u string) string {
	s := u
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	n := strings.TrimRight(b.String(), "-")
	if len(n) > 60 {
		n = strings.TrimRight(n[:60], "-")
	}
	return n
}

// Validate checks the source and normalizes its URL in place (and sets
// Domain and Crawl).
func (s *Source) Validate() error {
	if err := ValidateName(s.Name); err != nil {
		return err
	}
	if s.SchemaVersion != SchemaVersion {
		return fmt.Errorf("source %s: schema_version %q not understood (this build: %q)", s.Name, s.SchemaVersion, SchemaVersion)
	}
	n, err := crawl.New("x").NormalizeURL(s.URL)
	if err != nil {
		return fmt.Errorf("source %s: url %q: %w", s.Name, s.URL, err)
	}
	s.URL = n
	d, _, err := crawl.DomainOf(n)
	if err != nil {
		return fmt.Errorf("source %s: url %q: %w", s.Name, s.URL, err)
	}
	s.Domain = d
	s.Crawl = CrawlPrefix + s.Name
	switch s.Scope {
	case crawl.ScopeHost, crawl.ScopeDomain, crawl.ScopePrefix:
	default:
		return fmt.Errorf("source %s: scope %q: must be host, domain or prefix", s.Name, s.Scope)
	}
	switch {
	case s.Every <= 0:
		return fmt.Errorf("source %s: check interval must be positive", s.Name)
	case s.BackoffBase <= 0 || s.BackoffMax < s.BackoffBase:
		return fmt.Errorf("source %s: backoff base must be positive and at most the backoff max", s.Name)
	case s.Jitter < 0:
		return fmt.Errorf("source %s: jitter must not be negative", s.Name)
	case s.MaxDepth < 0:
		return fmt.Errorf("source %s: max depth must not be negative", s.Name)
	case s.MaxPages < 0:
		return fmt.Errorf("source %s: max pages must not be negative (0: unlimited)", s.Name)
	case s.Delay < 0:
		return fmt.Errorf("source %s: delay must not be negative", s.Name)
	case s.Timeout <= 0:
		return fmt.Errorf("source %s: timeout must be positive", s.Name)
	case strings.TrimSpace(s.UserAgent) == "" || strings.ContainsAny(s.UserAgent, "\r\n"):
		return fmt.Errorf("source %s: user agent must be one non-empty line", s.Name)
	case s.ConsecutiveFailures < 0 || s.Checks < 0 || s.Acquisitions < 0:
		return fmt.Errorf("source %s: negative counters", s.Name)
	}
	switch s.LastOutcome {
	case "", Unchanged, Changed, First, Failed:
	default:
		return fmt.Errorf("source %s: last_outcome %q unknown", s.Name, s.LastOutcome)
	}
	for hp, addr := range s.Resolve {
		if err := crawl.ValidateResolve(hp, addr); err != nil {
			return fmt.Errorf("source %s: %w", s.Name, err)
		}
	}
	return nil
}

// Due reports whether the source's next check is due at now.
func (s *Source) Due(now time.Time) bool {
	return s.NextCheckAfter == nil || !now.Before(*s.NextCheckAfter)
}

// JitterBound is the exclusive upper bound of the random delay added to
// every next check: the source's jitter, capped at a quarter of its check
// interval (so a frequent check is not pushed past its next turn).
func (s *Source) JitterBound() time.Duration {
	return min(s.Jitter.D(), s.Every.D()/4)
}

// Backoff is the wait after the n-th consecutive failure (n >= 1):
// BackoffBase * 2^(n-1), at most BackoffMax.
func (s *Source) Backoff(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	base, limit := s.BackoffBase.D(), s.BackoffMax.D()
	f := float64(base) * math.Pow(2, float64(n-1))
	if f >= float64(limit) {
		return limit
	}
	return time.Duration(f)
}

// NextCheck is the next check time after a check at now: the interval
// (or, after a failure, the backoff of the failure streak), plus a jitter
// drawn by rnd in [0, JitterBound()). rnd(n) returns [0, n).
func (s *Source) NextCheck(now time.Time, rnd func(n int64) int64) time.Time {
	wait := s.Every.D()
	if s.ConsecutiveFailures > 0 {
		wait = s.Backoff(s.ConsecutiveFailures)
	}
	if b := s.JitterBound(); b > 0 && rnd != nil {
		wait += time.Duration(rnd(int64(b)))
	}
	return now.Add(wait)
}

// DueStamp identifies the check the source is due for: its
// next_check_after ("0" before the first check). Check job IDs carry it,
// so asking twice for the same due check makes one job.
func (s *Source) DueStamp() string {
	if s.NextCheckAfter == nil {
		return "0"
	}
	return s.NextCheckAfter.UTC().Format("20060102T150405.000000Z")
}

// Marshal renders the source's JSON.
func (s *Source) Marshal() []byte {
	b, _ := json.MarshalIndent(s, "", "  ")
	return append(b, '\n')
}

// Parse decodes and validates a source file's content; name is the name
// its file gives it.
func Parse(name string, data []byte) (*Source, error) {
	var s Source
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("source %s: invalid JSON: %w", name, err)
	}
	if s.Name != name {
		return nil, fmt.Errorf("source %s: file names source %q", name, s.Name)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Path is the file of source name.
func Path(sp *job.Spool, name string) string { return sp.Path(Dir, name+".json") }

func lockPath(sp *job.Spool, name string) string { return sp.Path(Dir, name+".lock") }

// Lock takes the source's exclusive flock (sources/<name>.lock; lock
// files are left in place: removing one under a waiter would let two
// holders in).
func Lock(sp *job.Spool, name string) (*crawl.Flock, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if err := fsq.MkdirDurable(sp.Path(Dir)); err != nil {
		return nil, fmt.Errorf("sources: %w", err)
	}
	l, err := crawl.LockFile(lockPath(sp, name), false, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("source %s: lock: %w", name, err)
	}
	return l, nil
}

// Load reads source name. A missing file is ErrNotFound; a symlink, a
// directory or a file that does not parse is an error naming the file.
func Load(sp *job.Spool, name string) (*Source, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	p := Path(sp, name)
	b, err := fsq.ReadFileCapped(p, MaxFileSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("source %s: %w", name, ErrNotFound)
		}
		return nil, fmt.Errorf("source %s: %w", name, err)
	}
	s, err := Parse(name, b)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, p)
	}
	return s, nil
}

// write writes the source atomically; the caller holds its lock.
func write(sp *job.Spool, s *Source, now time.Time) error {
	s.UpdatedAt = now
	s.Version++
	if err := fsq.WriteFile(Path(sp, s.Name), s.Marshal()); err != nil {
		return fmt.Errorf("source %s: write: %w", s.Name, err)
	}
	return nil
}

// Create registers s (validated first). An existing source of that name is
// ErrExists.
func Create(sp *job.Spool, s *Source, now time.Time) error {
	if err := s.Validate(); err != nil {
		return err
	}
	l, err := Lock(sp, s.Name)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if _, err := os.Lstat(Path(sp, s.Name)); err == nil {
		return fmt.Errorf("source %s: %w", s.Name, ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("source %s: %w", s.Name, err)
	}
	s.CreatedAt = now
	return write(sp, s, now)
}

// Update changes source name under its lock: fn sees the current source
// and may veto by returning an error; the result is validated before it
// is written.
func Update(sp *job.Spool, name string, now time.Time, fn func(s *Source) error) (*Source, error) {
	l, err := Lock(sp, name)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	return UpdateLocked(sp, name, now, fn)
}

// UpdateLocked is Update for a caller that holds the source's lock.
func UpdateLocked(sp *job.Spool, name string, now time.Time, fn func(s *Source) error) (*Source, error) {
	s, err := Load(sp, name)
	if err != nil {
		return nil, err
	}
	if err := fn(s); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := write(sp, s, now); err != nil {
		return nil, err
	}
	return s, nil
}

// Remove deletes source name (its crawl, if any, is kept).
func Remove(sp *job.Spool, name string) error {
	l, err := Lock(sp, name)
	if err != nil {
		return err
	}
	defer l.Unlock()
	p := Path(sp, name)
	fi, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("source %s: %w", name, ErrNotFound)
		}
		return fmt.Errorf("source %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("source %s: %s is not a regular file; remove it by hand", name, p)
	}
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("source %s: %w", name, err)
	}
	return fsq.SyncDir(sp.Path(Dir))
}

// Problem is a file of sources/ that is not a readable source.
type Problem struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// List reads every source, sorted by name; entries that are not readable
// sources (bad names, symlinks, malformed JSON, invalid fields) are
// returned as problems, never fatal. Hidden files, temp files and lock
// files are skipped.
func List(sp *job.Spool) ([]*Source, []Problem, error) {
	dir := sp.Path(Dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("sources: %w", err)
	}
	var out []*Source
	var probs []Problem
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") || strings.HasSuffix(n, ".lock") {
			continue
		}
		p := filepath.Join(dir, n)
		name, ok := strings.CutSuffix(n, ".json")
		if !ok || ValidateName(name) != nil {
			probs = append(probs, Problem{File: p, Error: "not a source file (sources/<name>.json, name " + namePattern().String() + ")"})
			continue
		}
		s, err := Load(sp, name)
		if err != nil {
			probs = append(probs, Problem{File: p, Error: err.Error()})
			continue
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, probs, nil
}
