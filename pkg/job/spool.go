package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/farro-dev/farro/pkg/fsq"
)

// Spool is a spool directory tree. Its methods are the job transactions.
type Spool struct {
	Root string

	// The barrier is opened on first use, under barrierMu; a failed open
	// is not remembered, so the next transaction tries again.
	barrierMu   sync.Mutex
	barrier     *fsq.Barrier
	barrierOpts []fsq.BarrierOption
	existing    bool                                                              // Existing: refuse a root that is not a spool
	pools       sync.Map                                                          // "locks/<agent>", "files/<agent>": the agent's pools (see PoolDir)
	newBarrier  func(dir string, opts ...fsq.BarrierOption) (*fsq.Barrier, error) // nil: fsq.NewBarrier; tests replace it
	stream      stream                                                            // the writer of events/ (stream.go)
}

// Option configures Open.
type Option func(*Spool)

// WithBarrierSync replaces the syncfs(2) of the spool's group-commit
// barrier (fsq.WithSyncFunc), for tests that inject sync failures.
func WithBarrierSync(f func(fd int) error) Option {
	return func(s *Spool) { s.barrierOpts = append(s.barrierOpts, fsq.WithSyncFunc(f)) }
}

// sync is the group-commit barrier of the spool's file system (see
// fsq.Barrier): Claim and Commit place their few ordering points there, so
// that concurrent transactions share one syncfs.
func (s *Spool) sync() error {
	b, err := s.openBarrier()
	if err != nil {
		return err
	}
	return b.Wait()
}

// openBarrier returns the spool's barrier, opening it if it is not open
// yet. An open that fails (say EMFILE) is tried again by the next call.
func (s *Spool) openBarrier() (*fsq.Barrier, error) {
	s.barrierMu.Lock()
	defer s.barrierMu.Unlock()
	if s.barrier != nil {
		return s.barrier, nil
	}
	open := s.newBarrier
	if open == nil {
		open = fsq.NewBarrier
	}
	b, err := open(s.Root, s.barrierOpts...)
	if err != nil {
		return nil, err
	}
	s.barrier = b
	return b, nil
}

// Sync makes everything written to the spool's file system so far
// durable, sharing one syncfs with the concurrent transactions of this
// Spool (group commit). Handlers use it between staging their output
// (fsq.Stage) and putting it in place.
func (s *Spool) Sync() error { return s.sync() }

// Syncs is how many group-commit syncs this Spool has made.
func (s *Spool) Syncs() uint64 {
	b, err := s.openBarrier()
	if err != nil {
		return 0
	}
	return b.Syncs()
}

// Directories of the spool besides the state directories.
const (
	TmpDir     = "tmp"
	CorruptDir = "corrupt"
	LockSuffix = ".lock"
	// AgentsDir holds the registry of running processes (one lock and
	// one record per agent id; managerd's and watchdogd's in
	// agents/daemons/): see internal/registry.
	AgentsDir = "agents"
)

// ErrNotSpool reports a directory that is not a farro spool: it does not
// exist, or it holds other things and no incoming/. Daemons and farroctl
// refuse it (a mistyped --spool must not become a new, empty queue that
// nobody serves).
var ErrNotSpool = errors.New("not a farro spool")

// Existing makes Open refuse a root that is not a spool already (see
// ErrNotSpool), except an existing directory that is empty (dot files and
// a README aside: the checkout's ./spool, a directory made by
// systemd-tmpfiles or mkdir), which Open turns into one. Without it Open
// creates whatever is missing, the root included (farroctl init, tests).
func Existing() Option { return func(s *Spool) { s.existing = true } }

// IsSpool reports whether root is a spool: a directory holding
// incoming/. An error other than a missing root is returned as is.
func IsSpool(root string) (bool, error) {
	ok, err := fsq.IsRealDir(filepath.Join(root, Queued.Dir()))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return ok, err
}

// CheckExisting reports, reading only, whether Open with Existing would
// accept root: a spool, or an empty directory that it would lay out.
// (A daemon's --check-config.)
func CheckExisting(root string) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("spool %s: %w", root, err)
	}
	return checkExisting(abs)
}

// checkExisting applies Existing to the absolute root.
func checkExisting(root string) error {
	hint := fmt.Sprintf("check --spool or FARRO_SPOOL, or create one with `farroctl init %s`", root)
	fi, err := os.Stat(root)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("spool %s: %w: it does not exist (%s)", root, ErrNotSpool, hint)
	}
	if err != nil {
		return fmt.Errorf("spool %s: %w", root, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("spool %s: %w: not a directory", root, ErrNotSpool)
	}
	if ok, err := IsSpool(root); err != nil || ok {
		return err
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("spool %s: %w", root, err)
	}
	var layout []string // top-level names: completed/succeeded is "completed"
	for _, d := range layoutDirs() {
		top, _, _ := strings.Cut(filepath.ToSlash(d), "/")
		layout = append(layout, top)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || name == "README.md" {
			continue
		}
		// A directory of the layout's own names is a spool being laid
		// out: by another daemon starting at the same moment, or by an
		// init that was cut short (Open makes incoming/, the mark of a
		// spool, last).
		if e.IsDir() && slices.Contains(layout, name) {
			continue
		}
		return fmt.Errorf("spool %s: %w: it has no incoming/ but holds other things, such as %q (%s)", root, ErrNotSpool, name, hint)
	}
	return nil
}

// layoutDirs lists the directories Open makes in a spool's root, in the
// order it makes them: incoming/ last, so that IsSpool holds only once the
// whole layout is there.
func layoutDirs() []string {
	dirs := []string{TmpDir, CorruptDir, AgentsDir}
	for _, st := range States {
		if st != Queued {
			dirs = append(dirs, st.Dir())
		}
	}
	return append(dirs, Queued.Dir())
}

// Open returns the spool at root, creating any missing directory of the
// layout (durably). With Existing, root must be a spool or an empty
// directory.
func Open(root string, opts ...Option) (*Spool, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("spool %s: %w", root, err)
	}
	s := &Spool{Root: abs}
	for _, o := range opts {
		o(s)
	}
	if s.existing {
		if err := checkExisting(abs); err != nil {
			return nil, err
		}
	}
	for _, d := range layoutDirs() {
		p := filepath.Join(abs, d)
		if err := fsq.MkdirDurable(p); err != nil {
			return nil, fmt.Errorf("spool layout: %w", err)
		}
		if ok, err := fsq.IsRealDir(p); err != nil || !ok {
			return nil, fmt.Errorf("spool layout: %s is not a directory", p)
		}
	}
	return s, nil
}

// PoolDir is the directory, in in-progress/<agent>/, that holds what an
// agent's claims recycle instead of making and deleting per job: lock
// directories in locks/ (fsq.LockPool) and spare files for job.json
// rewrites in files/ (fsq.SparePool). Hidden from listings, like every dot
// entry, written by that agent alone, and cleared when it starts again.
const PoolDir = ".pool"

// lockPool returns the lock pool of agent's claims.
func (s *Spool) lockPool(agent string) *fsq.LockPool {
	if p, ok := s.pools.Load("locks/" + agent); ok {
		return p.(*fsq.LockPool)
	}
	p, _ := s.pools.LoadOrStore("locks/"+agent, fsq.NewLockPool(filepath.Join(s.AgentDir(agent), PoolDir, "locks")))
	return p.(*fsq.LockPool)
}

// sparePool returns the spare files of agent's claims: their job.json
// rewrites are swapped in (renameat2 RENAME_EXCHANGE), and a spare is
// written again once this Spool's barrier made the swap durable.
func (s *Spool) sparePool(agent string) *fsq.SparePool {
	if p, ok := s.pools.Load("files/" + agent); ok {
		return p.(*fsq.SparePool)
	}
	gen := func() (uint64, uint64) {
		b, err := s.openBarrier()
		if err != nil {
			return 0, 0
		}
		return b.Generation()
	}
	p, _ := s.pools.LoadOrStore("files/"+agent, fsq.NewSparePool(filepath.Join(s.AgentDir(agent), PoolDir, "files"), gen))
	return p.(*fsq.SparePool)
}

// Path joins elements below the spool root.
func (s *Spool) Path(elem ...string) string {
	return filepath.Join(append([]string{s.Root}, elem...)...)
}

// StateDir is the directory of st (for InProgress, the parent of the agent
// directories).
func (s *Spool) StateDir(st State) string { return s.Path(st.Dir()) }

// AgentDir is in-progress/<agent>.
func (s *Spool) AgentDir(agent string) string { return s.Path(InProgress.Dir(), agent) }

// JobDir is where job id lives in state st (agent only for InProgress).
func (s *Spool) JobDir(st State, agent, id string) string {
	if st == InProgress {
		return s.Path(InProgress.Dir(), agent, id)
	}
	return s.Path(st.Dir(), id)
}

// LockPath is the claim lock of job id: incoming/<id>.lock.
func (s *Spool) LockPath(id string) string { return s.Path(Queued.Dir(), id+LockSuffix) }

// Location is one place a job directory was found.
type Location struct {
	State State  `json:"state"`
	Agent string `json:"agent,omitempty"`
	Dir   string `json:"dir"`
}

// Locate finds every directory named id in the state directories. A
// healthy spool yields exactly one location; none means ErrNotFound.
func (s *Spool) Locate(id string) ([]Location, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	var locs []Location
	check := func(st State, agent, dir string) {
		if _, err := os.Lstat(dir); err == nil {
			locs = append(locs, Location{State: st, Agent: agent, Dir: dir})
		}
	}
	for _, st := range States {
		if st == InProgress {
			agents, err := fsq.ScanDir(s.StateDir(InProgress))
			if err != nil {
				return nil, err
			}
			for _, a := range agents.Dirs {
				check(InProgress, a, s.JobDir(InProgress, a, id))
			}
			continue
		}
		check(st, "", s.JobDir(st, "", id))
	}
	if len(locs) == 0 {
		return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	return locs, nil
}

// ReadJob reads and validates dir/job.json. A symlink or non-directory in
// place of the job directory, a job.json that is not a regular file (FIFO,
// socket, directory, symlink) or is over MaxJobFileSize, or one whose id
// differs from the directory name, is ErrCorrupt: the callers quarantine
// it. The read never blocks and never loads more than the cap.
func ReadJob(dir string) (*Job, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", dir, fsq.ErrVanished)
		}
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory (symlinks are refused)", ErrCorrupt, dir)
	}
	data, err := fsq.ReadFileCapped(filepath.Join(dir, JobFile), MaxJobFileSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, derr := os.Lstat(dir); derr != nil {
				return nil, fmt.Errorf("%s: %w", dir, fsq.ErrVanished)
			}
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, dir, err)
	}
	j, err := ParseJob(data)
	if err != nil {
		return j, fmt.Errorf("%s: %w", dir, err)
	}
	if j.ID != filepath.Base(dir) {
		return nil, fmt.Errorf("%w: %s: job.json names id %q", ErrCorrupt, dir, j.ID)
	}
	return j, nil
}

// ReadPrompt reads dir/prompt.json, capped at MaxPromptSize. A prompt.json
// that is not a regular file or is over the cap is ErrCorrupt (with the
// fsq error in the chain); it is never read whole.
func ReadPrompt(dir string) (json.RawMessage, error) {
	b, err := fsq.ReadFileCapped(filepath.Join(dir, PromptFile), MaxPromptSize)
	if err != nil {
		if fsq.IsHostile(err) {
			return nil, fmt.Errorf("prompt: %w: %w", ErrCorrupt, err)
		}
		return nil, fmt.Errorf("prompt: %w", err)
	}
	return b, nil
}

// Quarantine moves path (a job directory, or whatever was planted in its
// place) into corrupt/ under a unique name, with a sibling
// <name>.quarantine.json saying why. Nothing is ever deleted. It returns the
// new path.
func (s *Spool) Quarantine(path, reason string) (string, error) {
	name := filepath.Base(path) + "." + time.Now().UTC().Format("20060102T150405.000000Z")
	dst := s.Path(CorruptDir, name)
	fsq.CrashPoint("quarantine/rename:before") // for test/crash; no-op in release builds
	if err := fsq.Rename(path, dst); err != nil {
		return "", fmt.Errorf("quarantine: %w", err)
	}
	note, _ := json.MarshalIndent(map[string]any{
		"from": path, "reason": reason, "at": time.Now().UTC(),
	}, "", "  ")
	fsq.CrashPoint("quarantine/note:before")
	if err := fsq.WriteFile(dst+".quarantine.json", append(note, '\n')); err != nil {
		return dst, fmt.Errorf("quarantine note: %w", err)
	}
	fsq.CrashPoint("quarantine/note:after")
	return dst, nil
}
