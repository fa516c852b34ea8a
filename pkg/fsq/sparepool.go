package fsq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// SparePool stages atomic rewrites (Stage, Barrier.Wait, Replace) without
// making a file or freeing one per rewrite. The new content is written
// into a spare file of the pool's private directory, in place, and Replace
// swaps it with the target by renameat2(RENAME_EXCHANGE): the target's
// name now holds the new inode, and the old inode, with the old content,
// becomes a spare in the pool. A temp file made and an old file freed per
// rewrite (what Stage and Replace do) are on ext4 most of a rewrite's cost.
//
// A spare that held a file's old content is written again only once the
// exchange that took it out is durable (a sync that began after it has
// completed): otherwise a power cut could keep the new bytes written into
// it and lose the exchange, leaving the target's name on that inode with
// another file's content.
//
// The pool's directory belongs to one process. A filesystem without
// renameat2 flags (EINVAL) makes the pool fall back to Stage for good.
type SparePool struct {
	dir string
	// gen returns the barrier's syncs begun and completed (see
	// Barrier.Generation); nil: spares are never reused.
	gen func() (started, completed uint64)

	initMu   sync.Mutex
	mu       sync.Mutex
	made     bool
	fallback bool
	ready    []string // spares that may be written now
	cooling  []cooling
}

type cooling struct {
	name  string
	after uint64 // reusable once completed >= after
}

// spareKeep bounds the spares kept (ready and cooling); more are removed.
const spareKeep = 256

// NewSparePool returns a pool in dir (created on first use) whose spares
// become reusable as gen reports syncs completing.
func NewSparePool(dir string, gen func() (started, completed uint64)) *SparePool {
	return &SparePool{dir: dir, gen: gen}
}

// Stage writes data into a spare for path; Replace (after a Barrier.Wait
// that followed Stage) puts it in place. Like Stage, nothing is fsynced.
func (p *SparePool) Stage(path string, data []byte) (*Staged, error) {
	name, fresh, err := p.get()
	if err != nil || name == "" {
		return Stage(path, data)
	}
	hook(OpCreate, path, "")
	record(RecBefore, path, "", nil)
	if err := rewrite(name, data, fresh); err != nil {
		p.discard(name)
		return nil, fmt.Errorf("stage %s: %w", path, classify(err))
	}
	return &Staged{tmp: name, path: path, spares: p}, nil
}

// exchange is Replace for a staged spare.
func (p *SparePool) exchange(s *Staged) error {
	hook(OpRename, s.tmp, s.path)
	record(RecBefore, s.tmp, s.path, nil)
	err := unix.Renameat2(unix.AT_FDCWD, s.tmp, unix.AT_FDCWD, s.path, unix.RENAME_EXCHANGE)
	switch {
	case err == nil:
		record(RecExchange, s.tmp, s.path, nil)
		p.cool(s.tmp)
		return nil
	case errors.Is(err, unix.ENOENT):
		// No target to swap with (or the target's directory is gone):
		// a plain rename tells which, and consumes the spare.
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		p.mu.Lock()
		p.fallback = true
		p.mu.Unlock()
	default:
		return &fs.PathError{Op: "exchange", Path: s.path, Err: err}
	}
	if err := os.Rename(s.tmp, s.path); err != nil {
		return err
	}
	record(RecRename, s.tmp, s.path, nil)
	return nil
}

// release takes back a staged spare that was not put in place.
func (p *SparePool) release(name string) {
	p.mu.Lock()
	if len(p.ready)+len(p.cooling) < spareKeep {
		p.ready = append(p.ready, name)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.discard(name)
}

// cool keeps a spare that holds a replaced file's old content until the
// exchange is durable.
func (p *SparePool) cool(name string) {
	if p.gen == nil {
		p.discard(name)
		return
	}
	started, _ := p.gen()
	p.mu.Lock()
	if len(p.ready)+len(p.cooling) < spareKeep {
		p.cooling = append(p.cooling, cooling{name: name, after: started + 1})
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.discard(name)
}

// get returns a spare to write (fresh: just made, empty), or "" when the
// pool falls back to Stage.
func (p *SparePool) get() (name string, fresh bool, err error) {
	var completed uint64
	if p.gen != nil {
		_, completed = p.gen()
	}
	p.mu.Lock()
	if p.fallback {
		p.mu.Unlock()
		return "", false, nil
	}
	// Cooling spares are in exchange order: the first not yet durable
	// ends the run.
	n := 0
	for n < len(p.cooling) && p.cooling[n].after <= completed {
		p.ready = append(p.ready, p.cooling[n].name)
		n++
	}
	p.cooling = p.cooling[n:]
	if k := len(p.ready); k > 0 {
		name = p.ready[k-1]
		p.ready = p.ready[:k-1]
		p.mu.Unlock()
		return name, false, nil
	}
	p.mu.Unlock()
	if err := p.init(); err != nil {
		return "", false, err
	}
	name = filepath.Join(p.dir, RandomName())
	return name, true, nil
}

func (p *SparePool) init() error {
	p.initMu.Lock()
	defer p.initMu.Unlock()
	p.mu.Lock()
	made := p.made
	p.mu.Unlock()
	if made {
		return nil
	}
	if err := MkdirDurable(p.dir); err != nil {
		return fmt.Errorf("spare pool: %w", err)
	}
	if names, err := ReadNames(p.dir); err == nil {
		for _, n := range names {
			p.discard(filepath.Join(p.dir, n))
		}
	}
	p.mu.Lock()
	p.made = true
	p.mu.Unlock()
	return nil
}

func (p *SparePool) discard(name string) {
	hook(OpRemove, name, "")
	record(RecBefore, name, "", nil)
	if err := os.RemoveAll(name); err == nil {
		record(RecRemove, name, "", nil)
	}
}

// rewrite makes the file at name hold exactly data, in place (fresh: it
// does not exist yet and is created).
func rewrite(name string, data []byte, fresh bool) error {
	flags := os.O_WRONLY | unix.O_NOFOLLOW
	if fresh {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(name, flags, 0o644)
	if err != nil {
		return err
	}
	if fresh {
		record(RecCreate, name, "", nil)
		err = f.Chmod(0o644) // whatever the umask, like Stage: job.json is for jq
	}
	if err == nil {
		_, err = f.WriteAt(data, 0)
	}
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		record(RecOverwrite, name, "", data)
	}
	return err
}
