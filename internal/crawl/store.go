package crawl

import (
	"crypto/rand"
	"encoding/hex"
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

// Dir is the directory of the spool that holds the crawls.
const Dir = "crawls"

// Files and directories of a crawl.
const (
	ConfigFile   = "crawl.json"
	ConfigLock   = "crawl.lock"
	FrontierLock = "frontier.lock"
	FrontierFile = "frontier.json"
	DomainsDir   = "domains"
	QueuesDir    = "queues"
	SeenDir      = "seen"
	DeepDir      = "deep"
	OutcomesFile = "outcomes.jsonl"
	RequestsDir  = "requests"
	BodiesDir    = "bodies"
)

// ErrNoCrawl: no crawl of that name.
var ErrNoCrawl = errors.New("no such crawl")

// ErrExists: a crawl of that name exists (or existed: names are never
// reused, since its jobs' IDs would collide).
var ErrExists = errors.New("crawl exists")

// Store is one crawl's directory in a spool.
type Store struct {
	Spool *job.Spool
	Name  string
	Root  string // <spool>/crawls/<name>
}

// Open returns the store of crawl name (which need not exist yet).
func Open(s *job.Spool, name string) (*Store, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return &Store{Spool: s, Name: name, Root: s.Path(Dir, name)}, nil
}

// Path joins elem below the crawl's directory.
func (st *Store) Path(elem ...string) string {
	return filepath.Join(append([]string{st.Root}, elem...)...)
}

// Exists reports whether the crawl's directory exists.
func (st *Store) Exists() bool {
	ok, err := fsq.IsRealDir(st.Root)
	return err == nil && ok
}

// Create makes the crawl's directory with its crawl.json, atomically: it is
// built under a dot name and renamed into place, so the frontier never sees
// a crawl without its configuration. An existing crawl of that name is
// ErrExists.
func (st *Store) Create(c *Crawl) error {
	if c.Name != st.Name {
		return fmt.Errorf("crawl name %q does not match store %q", c.Name, st.Name)
	}
	parent := st.Spool.Path(Dir)
	if err := fsq.MkdirDurable(parent); err != nil {
		return err
	}
	if st.Exists() {
		return fmt.Errorf("crawl %s: %w", st.Name, ErrExists)
	}
	tmp := filepath.Join(parent, "."+st.Name+"."+randHex(4))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return fmt.Errorf("create crawl %s: %w", st.Name, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(tmp)
		}
	}()
	for _, d := range []string{DomainsDir, QueuesDir, SeenDir, DeepDir, RequestsDir, BodiesDir} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			return fmt.Errorf("create crawl %s: %w", st.Name, err)
		}
	}
	now := time.Now().UTC()
	c.CreatedAt, c.UpdatedAt, c.RunStarted = now, now, now
	if err := fsq.CreateFile(filepath.Join(tmp, ConfigFile), c.Marshal()); err != nil {
		return err
	}
	if err := fsq.SyncDir(tmp); err != nil {
		return err
	}
	if err := fsq.Rename(tmp, st.Root); err != nil {
		if errors.Is(err, fsq.ErrExists) {
			return fmt.Errorf("crawl %s: %w", st.Name, ErrExists)
		}
		return err
	}
	ok = true
	return nil
}

// Load reads crawl.json.
func (st *Store) Load() (*Crawl, error) {
	b, err := fsq.ReadFileCapped(st.Path(ConfigFile), MaxConfigFileSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("crawl %s: %w", st.Name, ErrNoCrawl)
		}
		return nil, err
	}
	c, err := ParseCrawl(b)
	if err != nil {
		return nil, fmt.Errorf("crawl %s: %w", st.Name, err)
	}
	if c.Name != st.Name {
		return nil, fmt.Errorf("crawl %s: crawl.json names %q", st.Name, c.Name)
	}
	return c, nil
}

// LockConfig takes crawl.lock: exclusive to change crawl.json, shared by
// the frontier while it releases URLs (so that once a pause or cancel has
// been written, no release that read the old state is still under way).
func (st *Store) LockConfig(shared bool) (*Flock, error) {
	return LockFile(st.Path(ConfigLock), shared, 10*time.Second)
}

// Update changes crawl.json under the exclusive crawl.lock: fn sees the
// current configuration and may veto by returning an error.
func (st *Store) Update(fn func(c *Crawl) error) (*Crawl, error) {
	if !st.Exists() {
		return nil, fmt.Errorf("crawl %s: %w", st.Name, ErrNoCrawl)
	}
	l, err := st.LockConfig(false)
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	c, err := st.Load()
	if err != nil {
		return nil, err
	}
	if err := fn(c); err != nil {
		return nil, err
	}
	c.UpdatedAt = time.Now().UTC()
	if err := fsq.WriteFile(st.Path(ConfigFile), c.Marshal()); err != nil {
		return nil, err
	}
	return c, nil
}

// List returns the names of the crawls in the spool, sorted.
func List(s *job.Spool) ([]string, error) {
	es, err := fsq.ScanDir(s.Path(Dir))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range es.Dirs {
		if ValidateName(n) == nil {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// DomainFile is the file name of a domain's entity (without directory):
// the canonical name with anything outside [a-z0-9.-_] escaped.
func DomainFile(domain string) string { return escapeName(domain) + ".json" }

// QueueDir is the directory of a domain's queue segments.
func (st *Store) QueueDir(domain string) string { return st.Path(QueuesDir, escapeName(domain)) }

func escapeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
