// Package scratch recycles the working directories agentd gives the
// attempts of a shared store's jobs on this host
// (<local>/scratch/<agent>/<job id>/), and removes the ones kept for
// their output once their job is gone or finished long enough ago.
//
// Why recycle: a directory and its prompt.json made per job, and freed
// later, are two inode allocations and two frees per job. On ext4 an
// allocation skips every inode freed in the last seconds, so a stream of
// new inodes beside deleted ones scans the inode table: with noop
// handlers that was most of agentd's CPU. A Pool makes each directory
// once, with its prompt.json, in <local>/scratch/<agent>/.pool/; a claim
// writes its prompt in place into the spare prompt.json there and renames
// the directory to its job's name; after the commit a directory that
// holds nothing worth keeping goes back by rename. Per job that is two
// renames and a write, no inode made or freed. It is the spool's lock
// pool and spare files (pkg/fsq) applied to working directories.
package scratch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// PoolDir is a pool's directory under <scratch>/<agent>/ (a dot entry:
// never a job id, skipped by the retention sweep).
const PoolDir = ".pool"

// poolKeep bounds the free directories a pool keeps; more are removed.
// It must not be below what an agent holds at its peak, or each burst
// frees directories that the next one makes again: per slot, its running
// job, up to eight claimed ahead and up to sixteen commits behind (a
// slow database), about 25 directories; 4096 covers 160 slots.
const poolKeep = 4096

// Pool is the pool of one agent's working directories. Its directory
// belongs to that agent: one process at a time (the host's registry
// allows one agentd per agent id), nobody else writes there.
type Pool struct {
	agentDir string // <scratch>/<agent>
	dir      string // <agentDir>/.pool

	initMu sync.Mutex
	mu     sync.Mutex
	made   bool
	plain  bool     // renameat2 flags unsupported: mkdir per job, as before
	free   []string // names in dir, ready to be taken

	// nameMu serialises what happens at the jobs' names: a Take and a
	// Give of the same job (a released attempt's directory, claimed again
	// by another slot before its Give) never interleave, and busy counts
	// the attempts using each directory; Give recycles one only at zero.
	nameMu sync.Mutex
	busy   map[string]int
}

// NewPool returns the pool of the agent whose working directories are
// in agentDir (<scratch>/<agent>); nothing is made before the first Take.
func NewPool(agentDir string) *Pool {
	return &Pool{agentDir: agentDir, dir: filepath.Join(agentDir, PoolDir), busy: map[string]int{}}
}

// Dir is the pool's directory.
func (p *Pool) Dir() string { return p.dir }

// Take gives job id its working directory, <agentDir>/<id>, holding
// prompt.json with prompt, and says whether prompt.json was written
// (false: the directory was there already and the caller writes the
// prompt as before). The directory comes out of the pool: it appears at
// its job's name only with its prompt written whole. A directory already
// at that name (an earlier attempt of the job on this agent kept its
// output) is used as it is.
func (p *Pool) Take(id string, prompt []byte) (dir string, written bool, err error) {
	if err := job.ValidateID(id); err != nil {
		return "", false, err
	}
	dst := filepath.Join(p.agentDir, id)
	if err := p.init(); err != nil {
		return "", false, err
	}
	p.nameMu.Lock()
	defer p.nameMu.Unlock()
	defer func() {
		if err == nil {
			p.busy[dst]++
		}
	}()
	if p.isPlain() {
		return dst, false, mkdirPlain(dst)
	}
	for {
		name, err := p.get()
		if err != nil {
			return "", false, err
		}
		if err := writePrompt(name, prompt); err != nil {
			p.discard(name)
			if errors.Is(err, errUnusable) {
				continue // a hostile or broken entry: removed, take another
			}
			return "", false, fmt.Errorf("working directory: %w", err)
		}
		err = unix.Renameat2(unix.AT_FDCWD, name, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
		switch {
		case err == nil:
			return dst, true, nil
		case errors.Is(err, unix.EEXIST):
			p.put(name)
			return dst, false, existingDir(dst)
		case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS):
			p.mu.Lock()
			p.plain = true
			p.mu.Unlock()
			p.discard(name)
			return dst, false, mkdirPlain(dst)
		default:
			p.put(name)
			return "", false, fmt.Errorf("working directory: %w", err)
		}
	}
}

// Give ends an attempt's use of dir (a working directory Take gave; the
// attempt committed, or lost its job: its handler has exited). When no
// other attempt uses it, dir goes back to the pool if it holds nothing
// worth keeping: only prompt.json and empty stdout/stderr logs. One that
// holds output, or anything the handler made, is kept (it is the job's
// logs, until the retention sweep). Give reports whether dir was
// recycled; errors are not the attempt's business and leave dir where it
// is.
func (p *Pool) Give(dir string) bool {
	if filepath.Dir(dir) != p.agentDir {
		return false
	}
	p.nameMu.Lock()
	defer p.nameMu.Unlock()
	n, ok := p.busy[dir]
	if !ok {
		return false // not one of Take's
	}
	if n > 1 {
		p.busy[dir] = n - 1
		return false
	}
	delete(p.busy, dir)
	p.mu.Lock()
	plain, made := p.plain, p.made
	p.mu.Unlock()
	if plain || !made {
		return false
	}
	if !recyclable(dir) {
		return false
	}
	name := filepath.Join(p.dir, fsq.RandomName())
	if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, name, unix.RENAME_NOREPLACE); err != nil {
		return false
	}
	p.put(name)
	return true
}

var errUnusable = errors.New("pool entry not usable")

// spare is what a free directory may hold: its prompt.json, and the
// first attempt's output files, empty (an exec handler's next job opens
// them again instead of creating them).
func spare(name string) bool {
	return name == job.PromptFile || name == job.OutputFile(job.Stdout, 1) || name == job.OutputFile(job.Stderr, 1)
}

// recyclable tells whether dir holds only prompt.json and empty output
// files, none of them anything but a regular file; the empty output
// files of attempts after the first are removed.
func recyclable(dir string) bool {
	names, err := fsq.ReadNames(dir)
	if err != nil {
		return false
	}
	var extra []string
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, n), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return false
		}
		if n == job.PromptFile {
			continue
		}
		if _, _, ok := job.ParseOutputFile(n); !ok || st.Size != 0 {
			return false // output, or something the handler made
		}
		if !spare(n) {
			extra = append(extra, n)
		}
	}
	for _, n := range extra {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			return false
		}
	}
	return true
}

// writePrompt writes prompt into the pool entry name's prompt.json, in
// place: the file keeps its inode, its content is replaced and cut to
// prompt's length, so nothing of a longer earlier prompt survives. In
// place is safe because nobody reads the file now: the directory is
// still the pool's (private to this agent) and gets its job's name only
// after this returns; its handler starts later. A SIGKILL in the middle
// leaves a pool entry whose prompt is rewritten whole before any use.
// An entry that is not a plain directory holding only spare files
// (a symlink, a FIFO, anything else) is errUnusable: never followed,
// never opened for writing.
func writePrompt(name string, prompt []byte) error {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errUnusable, name, err)
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errUnusable, name, err)
	}
	for _, n := range names {
		var st unix.Stat_t
		if !spare(n) {
			return fmt.Errorf("%w: %s holds %s", errUnusable, name, n)
		}
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return fmt.Errorf("%w: %s/%s is not a regular file", errUnusable, name, n)
		}
		if n != job.PromptFile && st.Size != 0 {
			return fmt.Errorf("%w: %s/%s is not empty", errUnusable, name, n)
		}
	}
	// O_NONBLOCK: a FIFO raced in opens at once and is refused below.
	pf, err := unix.Openat(fd, job.PromptFile, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENXIO) {
			return fmt.Errorf("%w: %s/%s: %v", errUnusable, name, job.PromptFile, err)
		}
		return err
	}
	f := os.NewFile(uintptr(pf), filepath.Join(name, job.PromptFile))
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("%w: %s is not a regular file", errUnusable, f.Name())
	}
	if err == nil {
		_, err = f.WriteAt(prompt, 0)
	}
	if err == nil {
		err = f.Truncate(int64(len(prompt)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// get returns a free entry, or makes one.
func (p *Pool) get() (string, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		name := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return name, nil
	}
	p.mu.Unlock()
	name := filepath.Join(p.dir, fsq.RandomName())
	if err := os.Mkdir(name, 0o755); err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	return name, nil
}

// put gives a free entry back (beyond poolKeep it is removed).
func (p *Pool) put(name string) {
	p.mu.Lock()
	if len(p.free) < poolKeep {
		p.free = append(p.free, name)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.discard(name)
}

// discard removes an entry (os.RemoveAll never follows a symlink).
func (p *Pool) discard(name string) { _ = os.RemoveAll(name) }

func (p *Pool) isPlain() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.plain
}

// init makes the pool's directory once and takes in what a predecessor
// left there: entries that are plain directories go to the free list
// (each is checked again when taken), anything else is removed.
func (p *Pool) init() error {
	p.initMu.Lock()
	defer p.initMu.Unlock()
	p.mu.Lock()
	made := p.made
	p.mu.Unlock()
	if made {
		return nil
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	names, err := fsq.ReadNames(p.dir)
	if err != nil {
		return fmt.Errorf("working directory pool: %w", err)
	}
	var free []string
	for _, n := range names {
		path := filepath.Join(p.dir, n)
		var st unix.Stat_t
		if len(free) < poolKeep && unix.Lstat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			free = append(free, path)
			continue
		}
		p.discard(path)
	}
	p.mu.Lock()
	p.free, p.made = free, true
	p.mu.Unlock()
	return nil
}

// mkdirPlain makes (or finds) a working directory the way it was made
// before pools: a filesystem without renameat2 flags.
func mkdirPlain(dst string) error {
	if err := os.Mkdir(dst, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("working directory: %w", err)
	}
	return existingDir(dst)
}

// existingDir checks that dst is a real directory (a symlink planted at a
// job's name is refused, never followed).
func existingDir(dst string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dst, &st); err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("working directory: %s is not a directory", dst)
	}
	return nil
}
