package crawl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// The domain registry is the spool-wide half of a domain: one file per
// canonical domain in <spool>/domains/, read by every crawl that meets
// the domain and written back by every crawl that knows it. It holds
// what outlives one crawl (status and reason, cooldown, last crawl,
// lifetime counters, and which crawls know the domain); per-crawl
// progress (queues, cursors, in-flight jobs, budgets, this crawl's
// counters) stays in crawls/NAME/domains/.
const (
	// RegistryDir is the registry's directory, at the spool's root.
	RegistryDir = "domains"
	// RegistryLockFile serialises the registry's writers (flock, held
	// for one batch of entries at a time).
	RegistryLockFile = ".lock"
	// RegistryBuiltFile marks a registry built from the crawls' domain
	// files (MigrateRegistry): the frontier builds it once, on the
	// first start that lacks it.
	RegistryBuiltFile = ".built"
	// RegistrySchemaVersion is the version of the registry's files this
	// build writes; a file of a newer version is refused, never
	// overwritten.
	RegistrySchemaVersion = 1
	// MaxRegistryFileSize caps the read of one registry file: a few
	// fields plus one small record per crawl that knows the domain.
	MaxRegistryFileSize = 4 << 20
)

// ReasonRegistryExhausted: a crawl met a domain the registry says is
// exhausted (another crawl fetched all it found): its URLs are held, not
// fetched, until farroctl domain reset.
const ReasonRegistryExhausted = "registry_exhausted"

// ErrRegistrySchema: a registry file written by a newer farro.
var ErrRegistrySchema = errors.New("domain registry file of a newer schema version")

// ErrRegistryCorrupt: a registry file that could not be read (not JSON,
// not a regular file, too large); it has been moved to corrupt/.
var ErrRegistryCorrupt = errors.New("unreadable domain registry file")

// RegistryCrawl is what one crawl last wrote back about a domain.
type RegistryCrawl struct {
	Status       DomainStatus `json:"status"`
	Reason       string       `json:"reason,omitempty"`
	PagesCrawled int64        `json:"pages_crawled"`
	PagesNew     int64        `json:"pages_new"`
	Errors       int64        `json:"errors"`
	UpdatedAt    time.Time    `json:"updated_at"`
}

// RegistryEntry is <spool>/domains/<domain>.json.
type RegistryEntry struct {
	SchemaVersion int          `json:"schema_version"`
	Domain        string       `json:"domain"`
	ParentDomain  string       `json:"parent_domain,omitempty"`
	Status        DomainStatus `json:"status"`
	Reason        string       `json:"reason,omitempty"`
	ReasonDetail  string       `json:"reason_detail,omitempty"`
	// StatusCrawl is the crawl whose observation set the status (empty
	// for an operator's reset), StatusAt when.
	StatusCrawl string `json:"status_crawl,omitempty"`
	// StatusSource is the source whose check set the status instead
	// (registry_check.go).
	StatusSource string    `json:"status_source,omitempty"`
	StatusAt     time.Time `json:"status_at"`
	// CooldownUntil: a blocked or unreachable domain is not fetched by
	// any crawl before this.
	CooldownUntil  *time.Time `json:"cooldown_until,omitempty"`
	FirstSeenAt    time.Time  `json:"first_seen_at"`
	FirstBlockedAt *time.Time `json:"first_blocked_at,omitempty"`
	LastCrawledAt  *time.Time `json:"last_crawled_at,omitempty"`
	UpdatedAt      time.Time  `json:"updated_at"`
	// Lifetime counters: the sums over Crawls.
	PagesCrawled int64 `json:"pages_crawled"`
	PagesNew     int64 `json:"pages_new"`
	Errors       int64 `json:"errors"`
	// Quality: pages with new content per page crawled, errors per page
	// crawled (0 before any page).
	Yield     float64 `json:"yield"`
	ErrorRate float64 `json:"error_rate"`
	// Crawls are the crawls that know the domain, by name.
	Crawls map[string]*RegistryCrawl `json:"crawls"`
	// Checks are the source checks of the domain (registry_check.go):
	// which sources check it, and the checks' own error streaks.
	Checks  *RegistryChecks `json:"checks,omitempty"`
	Version int64           `json:"version"` // +1 per write
}

// Marshal renders the entry's JSON.
func (e *RegistryEntry) Marshal() []byte {
	b, _ := json.MarshalIndent(e, "", "  ")
	return append(b, '\n')
}

// CrawlNames are the crawls that know the domain, sorted.
func (e *RegistryEntry) CrawlNames() []string {
	out := make([]string, 0, len(e.Crawls))
	for n := range e.Crawls {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// CrawlView is what crawl name last wrote back (nil: e is nil, or the
// crawl never wrote).
func (e *RegistryEntry) CrawlView(name string) *RegistryCrawl {
	if e == nil {
		return nil
	}
	return e.Crawls[name]
}

// CoolingDown tells whether the entry forbids requests at now.
func (e *RegistryEntry) CoolingDown(now time.Time) bool {
	return (e.Status == DomainBlocked || e.Status == DomainUnreachable) && e.CooldownUntil != nil && now.Before(*e.CooldownUntil)
}

// Registry is a spool's domain registry.
type Registry struct {
	Spool *job.Spool
	Dir   string
	// Wait is how long Update waits for the writer lock (ErrBusy after).
	Wait time.Duration
}

// OpenRegistry returns the registry of spool s (its directory is made
// by the first write); Update waits up to 10 s for the writer lock.
func OpenRegistry(s *job.Spool) *Registry {
	return &Registry{Spool: s, Dir: s.Path(RegistryDir), Wait: 10 * time.Second}
}

// Path is the file of domain's entry.
func (r *Registry) Path(domain string) string { return filepath.Join(r.Dir, DomainFile(domain)) }

// Load reads domain's entry: fs.ErrNotExist when there is none;
// ErrRegistrySchema for a newer file (left in place); ErrRegistryCorrupt
// for a file that could not be read, which is moved to the spool's
// corrupt/ first, so that it never stops a crawl twice.
func (r *Registry) Load(domain string) (*RegistryEntry, error) {
	p := r.Path(domain)
	b, err := fsq.ReadFileCapped(p, MaxRegistryFileSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if fsq.IsHostile(err) {
			return nil, r.quarantine(p, err)
		}
		return nil, err
	}
	e, err := parseRegistryEntry(b)
	if err != nil {
		if errors.Is(err, ErrRegistrySchema) {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		return nil, r.quarantine(p, err)
	}
	if e.Domain != domain {
		return nil, r.quarantine(p, fmt.Errorf("names domain %q", e.Domain))
	}
	return e, nil
}

func parseRegistryEntry(b []byte) (*RegistryEntry, error) {
	var e RegistryEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, err
	}
	if e.SchemaVersion > RegistrySchemaVersion {
		return nil, fmt.Errorf("%w: version %d, this build knows %d (run the newer farro)", ErrRegistrySchema, e.SchemaVersion, RegistrySchemaVersion)
	}
	if e.SchemaVersion < 1 {
		return nil, fmt.Errorf("no schema_version")
	}
	if !e.Status.Valid() {
		return nil, fmt.Errorf("unknown status %q", e.Status)
	}
	if e.Crawls == nil {
		e.Crawls = map[string]*RegistryCrawl{}
	}
	return &e, nil
}

func (r *Registry) quarantine(path string, cause error) error {
	to, qerr := r.Spool.Quarantine(path, "domain registry: "+cause.Error())
	if qerr != nil {
		return fmt.Errorf("%w: %s: %v (and cannot move it to corrupt/: %v)", ErrRegistryCorrupt, path, cause, qerr)
	}
	return fmt.Errorf("%w: %s: %v; moved to %s", ErrRegistryCorrupt, path, cause, to)
}

// Lock takes the registry's writer lock (waiting at most timeout).
func (r *Registry) Lock(timeout time.Duration) (*Flock, error) {
	if err := fsq.MkdirDurable(r.Dir); err != nil {
		return nil, err
	}
	return LockFile(filepath.Join(r.Dir, RegistryLockFile), false, timeout)
}

// Update reads, changes and writes back the entries of names under the
// writer lock: fn gets the entry (nil when there is none, or when the
// file was corrupt and has been moved away) and returns the entry to
// write (nil: write nothing). Each file is replaced atomically and the
// directory is fsynced once at the end. The errors are per name: a
// newer-schema file is left alone and reported, not overwritten.
func (r *Registry) Update(names []string, fn func(name string, e *RegistryEntry) *RegistryEntry) (map[string]error, error) {
	l, err := r.Lock(r.Wait)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	errs := map[string]error{}
	wrote := false
	for _, n := range names {
		e, err := r.Load(n)
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist):
		case errors.Is(err, ErrRegistryCorrupt):
			errs[n] = err // reported; a new entry replaces it
			e = nil
		default:
			errs[n] = err
			continue
		}
		out := fn(n, e)
		if out == nil {
			continue
		}
		out.SchemaVersion = RegistrySchemaVersion
		out.Version++
		out.sum()
		if err := fsq.WriteFile(r.Path(n), out.Marshal(), fsq.WithoutDirSync()); err != nil {
			errs[n] = err
			continue
		}
		wrote = true
	}
	if wrote {
		if err := fsq.SyncDir(r.Dir); err != nil {
			return errs, err
		}
	}
	return errs, nil
}

// sum recomputes the lifetime counters and quality signals.
func (e *RegistryEntry) sum() {
	e.PagesCrawled, e.PagesNew, e.Errors = 0, 0, 0
	for _, c := range e.Crawls {
		e.PagesCrawled += c.PagesCrawled
		e.PagesNew += c.PagesNew
		e.Errors += c.Errors
	}
	e.Yield, e.ErrorRate = 0, 0
	if e.PagesCrawled > 0 {
		e.Yield = float64(e.PagesNew) / float64(e.PagesCrawled)
		e.ErrorRate = float64(e.Errors) / float64(e.PagesCrawled)
	}
}

// Entries reads every entry, sorted by domain; unreadable ones are
// reported through bad (and moved to corrupt/ when hostile), not fatal.
func (r *Registry) Entries(bad func(name string, err error)) ([]*RegistryEntry, error) {
	names, err := readDirNames(r.Dir)
	if err != nil {
		return nil, err
	}
	var out []*RegistryEntry
	for _, n := range names {
		if !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") {
			continue
		}
		dn, ok := UnescapeName(strings.TrimSuffix(n, ".json"))
		if !ok {
			continue
		}
		e, err := r.Load(dn)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && bad != nil {
				bad(n, err)
			}
			continue
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Domain < out[j].Domain })
	return out, nil
}

// Built tells whether the registry has been built from the crawls'
// domain files (MigrateRegistry).
func (r *Registry) Built() bool {
	_, err := os.Lstat(filepath.Join(r.Dir, RegistryBuiltFile))
	return err == nil
}

// MarkBuilt records that the registry has been built.
func (r *Registry) MarkBuilt(now time.Time) error {
	if err := fsq.MkdirDurable(r.Dir); err != nil {
		return err
	}
	b, _ := json.Marshal(map[string]any{"schema_version": RegistrySchemaVersion, "built_at": now})
	return fsq.WriteFile(filepath.Join(r.Dir, RegistryBuiltFile), append(b, '\n'))
}

// UnescapeName reverses escapeName (DomainFile, QueueDir): the domain a
// file or directory name stands for; false for a name escapeName never
// makes.
func UnescapeName(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		var c byte
		if _, err := fmt.Sscanf(s[i+1:i+3], "%02X", &c); err != nil {
			return "", false
		}
		b.WriteByte(c)
		i += 2
	}
	return b.String(), true
}
