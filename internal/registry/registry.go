// Package registry keeps the spool's record of its running processes,
// spool/agents/: one agent id is one process, and one managerd and one
// watchdogd run per spool.
//
// Each process takes an flock(2) on its lock file when it starts and keeps
// it until it exits (the kernel drops it when the process dies, however it
// dies), so "is it running" is "is the flock held", never a guess from a
// pid. Beside the lock it keeps a JSON record (pid, identity, slots,
// started_at, last_seen refreshed every few seconds, version) for
// `farroctl agents`.
//
// Layout:
//
//	agents/<id>.lock, agents/<id>.json                  agentd --id <id>
//	agents/daemons/<name>.lock, agents/daemons/<name>.json   managerd, watchdogd
//
// The daemons live in a subdirectory so that their names never collide
// with an agent id: agent ids are file names directly under agents/.
package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/farro-dev/farro/internal/proc"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// Dir is the registry's directory below the spool root; DaemonsDir is
// the daemons' subdirectory of it.
const (
	Dir        = job.AgentsDir
	DaemonsDir = "daemons"
)

// Kinds of registered processes.
const (
	KindAgent  = "agent"
	KindDaemon = "daemon"
)

// ExitAlreadyRunning is the exit status of a daemon that refuses to start
// because its agent id (or, for managerd and watchdogd, its daemon) is
// already running on the spool. The systemd units list it in
// RestartPreventExitStatus=, so that a refused start is not retried in a
// loop. 150 is in the range LSB leaves to applications, clear of
// sysexits (64-78) and of systemd's own codes (200-243).
const ExitAlreadyRunning = 150

// DefaultRefresh is how often a holder rewrites its record's last_seen.
const DefaultRefresh = 5 * time.Second

// Record is the content of agents/<id>.json (and daemons/<name>.json).
type Record struct {
	Kind    string        `json:"kind"` // agent or daemon
	ID      string        `json:"id"`   // agent id, or the daemon's name
	PID     int           `json:"pid"`
	Process proc.Identity `json:"process"`
	Actor   string        `json:"actor"`           // e.g. agentd/w1
	Slots   int           `json:"slots,omitempty"` // agentd --concurrency
	// Host and Kinds are known on a PostgreSQL store (its agents
	// table): the daemon's host, and the kinds an agent claims.
	Host  string   `json:"host,omitempty"`
	Kinds []string `json:"kinds,omitempty"`
	// MaxAttempts is managerd's --max-attempts: the limit of jobs whose
	// max_attempts is 0 (farroctl ls and show print it as theirs).
	MaxAttempts int        `json:"max_attempts,omitempty"`
	Version     string     `json:"version"`
	StartedAt   time.Time  `json:"started_at"`
	LastSeen    time.Time  `json:"last_seen"`
	StoppedAt   *time.Time `json:"stopped_at,omitempty"` // set by a clean exit
}

// Options describe the process that registers.
type Options struct {
	Actor       string
	Slots       int
	MaxAttempts int // managerd's --max-attempts
	Version     string
	// Refresh is the period of the last_seen rewrites (default
	// DefaultRefresh; negative: never).
	Refresh time.Duration
	// Wait bounds the retries while the lock is busy (default 500ms): a
	// `farroctl agents` probe holds it shared for a moment.
	Wait time.Duration
}

// AlreadyRunningError is returned when the lock is held by another
// process.
type AlreadyRunningError struct {
	What    string // "agent id w1", "managerd"
	PID     int    // 0 when the holder could not be read
	Started time.Time
}

func (e *AlreadyRunningError) Error() string {
	if e.PID <= 0 {
		return e.What + " is already running (its lock is held; holder unknown)"
	}
	return fmt.Sprintf("%s is already running as pid %d (started %s)", e.What, e.PID, e.Started.Local().Format(time.RFC3339))
}

// ExitCode is the status a daemon exits with: ExitAlreadyRunning.
func (e *AlreadyRunningError) ExitCode() int { return ExitAlreadyRunning }

// Holder is a held registration; Release ends it.
type Holder struct {
	f        *os.File
	lockPath string
	jsonPath string

	mu   sync.Mutex
	rec  Record
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// AcquireAgent registers agent id: it fails with *AlreadyRunningError if
// another process holds agents/<id>.lock.
func AcquireAgent(s *job.Spool, id string, o Options) (*Holder, error) {
	if err := job.ValidateID(id); err != nil {
		return nil, fmt.Errorf("agent id: %w", err)
	}
	return acquire(s.Path(Dir), id, KindAgent, "agent id "+id, o)
}

// AcquireDaemon registers the spool's single instance of daemon name
// (managerd, watchdogd) in agents/daemons/.
func AcquireDaemon(s *job.Spool, name string, o Options) (*Holder, error) {
	if err := job.ValidateID(name); err != nil {
		return nil, fmt.Errorf("daemon name: %w", err)
	}
	dir := s.Path(Dir, DaemonsDir)
	if err := fsq.MkdirDurable(dir); err != nil {
		return nil, err
	}
	return acquire(dir, name, KindDaemon, name, o)
}

// holderInfo is what the lock file itself says about its holder, written
// under the flock, so that a refused process can name it.
type holderInfo struct {
	PID       int           `json:"pid"`
	StartedAt time.Time     `json:"started_at"`
	Process   proc.Identity `json:"process"`
}

func acquire(dir, name, kind, what string, o Options) (*Holder, error) {
	if o.Refresh == 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Wait <= 0 {
		o.Wait = 500 * time.Millisecond
	}
	lockPath := filepath.Join(dir, name+".lock")
	f, err := openLock(lockPath, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(o.Wait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("flock %s: %w", lockPath, err)
		}
		if time.Now().After(deadline) {
			_ = f.Close()
			return nil, alreadyRunning(lockPath, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	now := time.Now().UTC()
	self := proc.Self()
	info, _ := json.Marshal(holderInfo{PID: self.PID, StartedAt: now, Process: self})
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt(append(info, '\n'), 0)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", lockPath, err)
	}
	h := &Holder{
		f: f, lockPath: lockPath, jsonPath: filepath.Join(dir, name+".json"),
		rec: Record{Kind: kind, ID: name, PID: self.PID, Process: self, Actor: o.Actor, Slots: o.Slots, MaxAttempts: o.MaxAttempts,
			Version: o.Version, StartedAt: now, LastSeen: now},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if err := h.write(true); err != nil {
		_ = f.Close()
		return nil, err
	}
	go h.refresh(o.Refresh)
	return h, nil
}

// openLock opens (creating) a lock file without following a symlink and
// without blocking on a FIFO planted in its place, then clears O_NONBLOCK.
// The descriptor is close-on-exec: a handler agentd starts must never
// inherit (and so keep) the agent's flock.
func openLock(path string, mode int) (*os.File, error) {
	fd, err := syscall.Open(path, mode|syscall.O_CREAT|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		_ = f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	flags, err := fcntl(fd, syscall.F_GETFL, 0)
	if err == nil {
		_, err = fcntl(fd, syscall.F_SETFL, flags&^syscall.O_NONBLOCK)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("fcntl %s: %w", path, err)
	}
	return f, nil
}

func fcntl(fd, cmd, arg int) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), uintptr(arg))
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// alreadyRunning names the holder of lockPath from what it wrote into the
// lock file. A holder that has just taken the lock may not have written
// yet (the file still names its dead predecessor, or nothing): that is
// retried briefly, then reported as unknown.
func alreadyRunning(lockPath, what string) error {
	e := &AlreadyRunningError{What: what}
	for try := 0; try < 10; try++ {
		if try > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		b, err := fsq.ReadFileNoFollow(lockPath)
		if err != nil {
			continue
		}
		var hi holderInfo
		if json.Unmarshal(b, &hi) != nil || hi.PID <= 0 || proc.Check(hi.Process).Dead() {
			continue
		}
		e.PID, e.Started = hi.PID, hi.StartedAt
		break
	}
	return e
}

// Record returns the holder's current record.
func (h *Holder) Record() Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rec
}

func (h *Holder) write(durable bool) error {
	h.mu.Lock()
	b, err := json.MarshalIndent(h.rec, "", "  ")
	h.mu.Unlock()
	if err != nil {
		return err
	}
	var opts []fsq.WriteOption
	if !durable {
		opts = append(opts, fsq.WithoutDirSync()) // a lost last_seen is harmless
	}
	return fsq.WriteFile(h.jsonPath, append(b, '\n'), opts...)
}

func (h *Holder) refresh(every time.Duration) {
	defer close(h.done)
	if every < 0 {
		<-h.stop
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			h.mu.Lock()
			h.rec.LastSeen = now.UTC()
			h.mu.Unlock()
			_ = h.write(false) // best effort: liveness is the flock, not this
		}
	}
}

// Release stamps the record stopped and drops the lock. Calling it again
// does nothing.
func (h *Holder) Release() error {
	var err error
	h.once.Do(func() {
		close(h.stop)
		<-h.done
		now := time.Now().UTC()
		h.mu.Lock()
		h.rec.LastSeen, h.rec.StoppedAt = now, &now
		h.mu.Unlock()
		err = h.write(true)
		if cerr := h.f.Close(); err == nil {
			err = cerr // closing the only descriptor drops the flock
		}
	})
	return err
}

// Entry is one registered process as `farroctl agents` lists it.
type Entry struct {
	Record
	Live     bool   `json:"live"`      // the flock is held by someone
	JobsHeld int    `json:"jobs_held"` // directories in in-progress/<id>/ (agents)
	Problem  string `json:"problem,omitempty"`
}

// Listing is the registry's content.
type Listing struct {
	Agents  []Entry `json:"agents"`
	Daemons []Entry `json:"daemons"`
}

// List reads the registry: every agent and daemon with a record or a lock
// file, whether it is live, and for agents how many jobs they hold.
func List(s *job.Spool) (Listing, error) {
	agents, err := list(s.Path(Dir), KindAgent)
	if err != nil {
		return Listing{}, err
	}
	for i := range agents {
		if ents, err := fsq.ScanDir(s.AgentDir(agents[i].ID)); err == nil {
			agents[i].JobsHeld = len(ents.Dirs)
		}
	}
	daemons, err := list(s.Path(Dir, DaemonsDir), KindDaemon)
	if err != nil {
		return Listing{}, err
	}
	return Listing{Agents: agents, Daemons: daemons}, nil
}

func list(dir, kind string) ([]Entry, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return []Entry{}, nil
		}
		return nil, err
	}
	names := map[string]bool{}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !e.Type().IsRegular() {
			continue
		}
		for _, ext := range []string{".lock", ".json"} {
			if id, ok := strings.CutSuffix(n, ext); ok && job.ValidateID(id) == nil {
				names[id] = true
			}
		}
	}
	out := []Entry{}
	for id := range names {
		e := Entry{Record: Record{Kind: kind, ID: id}}
		if b, err := fsq.ReadFileNoFollow(filepath.Join(dir, id+".json")); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				e.Problem = "record unreadable: " + err.Error()
			} else {
				e.Problem = "no record"
			}
		} else if err := json.Unmarshal(b, &e.Record); err != nil {
			e.Problem = "record unreadable: " + err.Error()
		}
		e.Kind, e.ID = kind, id
		live, err := Held(filepath.Join(dir, id+".lock"))
		if err != nil && e.Problem == "" {
			e.Problem = err.Error()
		}
		e.Live = live
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Held reports whether someone holds the flock of the lock file at path:
// it tries a shared lock without waiting; if that succeeds nobody holds it
// (the lock is dropped at once). A missing lock file is not held.
func Held(path string) (bool, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return false, fmt.Errorf("%s is not a regular file", path)
	}
	err = syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB)
	switch {
	case err == nil:
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		return false, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true, nil
	}
	return false, fmt.Errorf("flock %s: %w", path, err)
}
