package fsq

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// LockPool takes and releases locks like TryLock and Unlock, for one
// holder that takes many: the lock directories, each with its owner file,
// are made once in the pool's private directory and recycled. Taking a
// lock writes the owner in place (the file keeps its inode and its block)
// and renames the directory to the lock's path with renameat2's
// RENAME_NOREPLACE; releasing it renames it back. Per lock that is two
// renames and one write instead of a mkdir, a create, an unlink and an
// rmdir: no inode is allocated or freed, which on ext4 is most of a lock's
// cost (an allocation scans past recently freed inodes, a free may issue a
// discard).
//
// What others see does not change: a lock is a directory at path holding
// an owner file, and it appears there whole, owner included (the mkdir of
// TryLock comes before its owner file). The owner is padded with spaces to
// the size the file already has, so a rewrite never truncates.
//
// The pool's directory belongs to its holder: nobody else writes there,
// and one process at a time uses it. A filesystem without renameat2
// flags (EINVAL) makes the pool fall back to TryLock and Unlock for good.
type LockPool struct {
	dir string

	initMu   sync.Mutex // serialises init
	mu       sync.Mutex
	made     bool                  // dir exists
	fallback bool                  // renameat2 with flags unsupported: TryLock/Unlock
	free     []*poolEntry          // ready to be taken
	busy     map[string]*poolEntry // lock path -> the entry taken there
}

// poolEntry is a lock directory of the pool.
type poolEntry struct {
	name string // its path in the pool when free
	size int    // its owner file's size
}

// lockPoolKeep bounds the free entries kept; more are removed.
const lockPoolKeep = 64

// NewLockPool returns a pool in dir, which it creates on first use. Only
// the pool's user may write in dir.
func NewLockPool(dir string) *LockPool {
	return &LockPool{dir: dir, busy: map[string]*poolEntry{}}
}

// Dir is the pool's directory.
func (p *LockPool) Dir() string { return p.dir }

// TryLock takes the lock at path with owner as its owner file's content:
// ErrLocked if the path exists. See TryLock for what holding means.
func (p *LockPool) TryLock(path string, owner []byte) error {
	e, err := p.get()
	if err != nil {
		return err
	}
	if e == nil {
		return TryLock(path, owner)
	}
	hook(OpRename, e.name, path)
	record(RecBefore, path, "", nil)
	data := padOwner(owner, e.size)
	if err := overwrite(filepath.Join(e.name, OwnerFile), data); err != nil {
		p.drop(e)
		return fmt.Errorf("lock %s: write owner: %w", path, err)
	}
	e.size = len(data)
	err = unix.Renameat2(unix.AT_FDCWD, e.name, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		record(RecRename, e.name, path, nil)
		p.mu.Lock()
		p.busy[path] = e
		p.mu.Unlock()
		return nil
	case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTEMPTY):
		p.put(e)
		return fmt.Errorf("lock %s: %w", path, ErrLocked)
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		p.mu.Lock()
		p.fallback = true
		p.mu.Unlock()
		p.drop(e)
		return TryLock(path, owner)
	}
	p.drop(e)
	return fmt.Errorf("lock %s: %w", path, classify(&fs.PathError{Op: "rename", Path: path, Err: err}))
}

// Unlock releases the lock at path, taken by this pool's TryLock or by
// anyone's: its directory comes back into the pool, emptied of anything
// but its owner file. A lock already gone is not an error.
func (p *LockPool) Unlock(path string) error {
	p.mu.Lock()
	plain := p.fallback || !p.made
	e := p.busy[path]
	delete(p.busy, path)
	p.mu.Unlock()
	if plain {
		return Unlock(path)
	}
	if e == nil {
		e = &poolEntry{}
	}
	e.name = filepath.Join(p.dir, RandomName())
	hook(OpRename, path, e.name)
	record(RecBefore, path, "", nil)
	if err := unix.Renameat2(unix.AT_FDCWD, path, unix.AT_FDCWD, e.name, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return Unlock(path)
	}
	record(RecRename, path, e.name, nil)
	// renameat2 moves a symlink itself, never its target: one planted
	// at path is removed here, as Unlock would.
	if fi, err := os.Lstat(e.name); err != nil || !fi.IsDir() {
		p.discard(e.name)
		return nil
	}
	// A handler record or a recovery guard may have come with it: the
	// entry is reused only as a directory holding a regular owner file.
	names, err := ReadNames(e.name)
	if err == nil {
		for _, n := range names {
			if n == OwnerFile {
				continue
			}
			hook(OpRemove, filepath.Join(e.name, n), "")
			record(RecBefore, filepath.Join(e.name, n), "", nil)
			if err = os.Remove(filepath.Join(e.name, n)); err != nil {
				break
			}
			record(RecRemove, filepath.Join(e.name, n), "", nil)
		}
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = os.Lstat(filepath.Join(e.name, OwnerFile))
	}
	if err != nil || !fi.Mode().IsRegular() {
		p.discard(e.name)
		return nil
	}
	e.size = int(fi.Size())
	p.put(e)
	return nil
}

// get returns a free entry, or a new one; nil (and no error) when the
// pool falls back to plain locks.
func (p *LockPool) get() (*poolEntry, error) {
	p.mu.Lock()
	if p.fallback {
		p.mu.Unlock()
		return nil, nil
	}
	if n := len(p.free); n > 0 {
		e := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return e, nil
	}
	p.mu.Unlock()
	if err := p.init(); err != nil {
		return nil, err
	}
	e := &poolEntry{name: filepath.Join(p.dir, RandomName())}
	hook(OpMkdir, e.name, "")
	record(RecBefore, e.name, "", nil)
	if err := os.Mkdir(e.name, 0o755); err != nil {
		return nil, fmt.Errorf("lock pool: %w", err)
	}
	record(RecMkdir, e.name, "", nil)
	owner := filepath.Join(e.name, OwnerFile)
	hook(OpCreate, owner, "")
	record(RecBefore, owner, "", nil)
	f, err := os.OpenFile(owner, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		p.discard(e.name)
		return nil, fmt.Errorf("lock pool: %w", err)
	}
	record(RecCreate, owner, "", nil)
	if err := f.Close(); err != nil {
		p.discard(e.name)
		return nil, fmt.Errorf("lock pool: %w", err)
	}
	return e, nil
}

// init makes the pool's directory and clears what a predecessor left in
// it, once (before any entry of this pool is made there).
func (p *LockPool) init() error {
	p.initMu.Lock()
	defer p.initMu.Unlock()
	p.mu.Lock()
	made := p.made
	p.mu.Unlock()
	if made {
		return nil
	}
	if err := MkdirDurable(p.dir); err != nil {
		return fmt.Errorf("lock pool: %w", err)
	}
	p.clearLeftovers()
	p.mu.Lock()
	p.made = true
	p.mu.Unlock()
	return nil
}

// put gives a free entry back (beyond lockPoolKeep it is removed).
func (p *LockPool) put(e *poolEntry) {
	p.mu.Lock()
	if len(p.free) < lockPoolKeep {
		p.free = append(p.free, e)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.discard(e.name)
}

// drop forgets an entry that may be in any state (a failed write).
func (p *LockPool) drop(e *poolEntry) { p.discard(e.name) }

func (p *LockPool) discard(name string) {
	hook(OpRemove, name, "")
	record(RecBefore, name, "", nil)
	if err := os.RemoveAll(name); err == nil {
		record(RecRemove, name, "", nil)
	}
}

// clearLeftovers removes the entries a previous process of this pool's
// holder left (killed between making one and using it, or with free
// ones): nobody else uses the directory.
func (p *LockPool) clearLeftovers() {
	names, err := ReadNames(p.dir)
	if err != nil {
		return
	}
	for _, n := range names {
		p.discard(filepath.Join(p.dir, n))
	}
}

// padOwner returns owner padded with spaces before its final newline to
// at least size bytes (JSON ignores the spaces), so that writing it over
// an owner file of that size leaves nothing of the old one.
func padOwner(owner []byte, size int) []byte {
	if len(owner) >= size {
		return owner
	}
	out := make([]byte, size)
	body := owner
	nl := len(body) > 0 && body[len(body)-1] == '\n'
	if nl {
		body = body[:len(body)-1]
	}
	n := copy(out, body)
	for i := n; i < size; i++ {
		out[i] = ' '
	}
	if nl {
		out[size-1] = '\n'
	}
	return out
}

// overwrite writes data over the start of the existing file at path, in
// place (no truncate: data is at least as long as the file). Not synced:
// like every lock, a recycled one need not survive a power cut.
func overwrite(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		record(RecOverwrite, path, "", data)
	}
	return err
}

// ReadNames lists dir, which must be a real directory (never a symlink's
// target): the names of a pool's entries.
func ReadNames(dir string) ([]string, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	return f.Readdirnames(-1)
}

// RandomName is a fresh random name (16 hex digits) for a pool entry.
func RandomName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
