package scratch

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// trashPrefix names a working directory being removed: it leaves its
// job's name first (one rename), so that a removal cut short by a crash
// never leaves half a directory under a job's name; a later pass removes
// what is left.
const trashPrefix = ".rm-"

// Sweeper removes kept working directories (<scratch>/<agent>/<id>/)
// whose job is due, a bounded number of entries per pass: it walks the
// agents' directories with a cursor kept across passes, so that a
// scratch of any size is covered, a slice at a time.
type Sweeper struct {
	root string // <scratch>

	mu     sync.Mutex
	agents []string // the agents' directories of this round, in order
	cur    *os.File // the directory being read
	at     int      // index in agents of cur
}

// NewSweeper returns a sweeper of the working directories under root.
func NewSweeper(root string) *Sweeper { return &Sweeper{root: root} }

// Due is asked, once a pass, which of ids may go: their job no longer
// exists, or finished longer ago than the retention.
type Due func(ctx context.Context, ids []string) (map[string]bool, error)

// Pass reads at most max entries of the agents' directories, asks due
// about the job ids among them, and removes the directories of those it
// names (never following a symlink). It returns the paths removed.
func (s *Sweeper) Pass(ctx context.Context, max int, due Due) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	type cand struct{ id, path string }
	var cands []cand
	read := 0
	for read < max {
		if s.cur == nil && !s.next() {
			break
		}
		dir := s.cur.Name()
		names, err := s.cur.Readdirnames(max - read)
		read += len(names)
		for _, n := range names {
			path := filepath.Join(dir, n)
			if strings.HasPrefix(n, trashPrefix) {
				_ = os.RemoveAll(path) // a removal cut short
				continue
			}
			if job.ValidateID(n) != nil {
				continue // the pool, anything not a job's
			}
			cands = append(cands, cand{n, path})
		}
		if err != nil || len(names) == 0 {
			s.cur.Close()
			s.cur = nil
			if err != nil && !errors.Is(err, io.EOF) {
				continue // this agent's directory is unreadable: the next
			}
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	ids := make([]string, len(cands))
	for i, c := range cands {
		ids[i] = c.id
	}
	gone, err := due(ctx, ids)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, c := range cands {
		if !gone[c.id] {
			continue
		}
		trash := filepath.Join(filepath.Dir(c.path), trashPrefix+fsq.RandomName())
		if err := os.Rename(c.path, trash); err != nil {
			continue // taken back to the pool, or removed, meanwhile
		}
		if err := os.RemoveAll(trash); err == nil {
			removed = append(removed, c.path)
		}
	}
	return removed, nil
}

// next opens the next agent's directory of the round (a new round lists
// the agents again); false when there is none.
func (s *Sweeper) next() bool {
	for {
		if s.at >= len(s.agents) {
			if s.agents != nil {
				// The round is over: the next pass starts a new one.
				s.agents, s.at = nil, 0
				return false
			}
			names, err := fsq.ReadNames(s.root)
			if err != nil || len(names) == 0 {
				return false
			}
			s.agents = names
		}
		n := s.agents[s.at]
		s.at++
		if strings.HasPrefix(n, ".") {
			continue
		}
		fd, err := unix.Open(filepath.Join(s.root, n), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // not a real directory (a symlink, a file): never followed
		}
		s.cur = os.NewFile(uintptr(fd), filepath.Join(s.root, n))
		return true
	}
}

// Close releases the directory the cursor holds open.
func (s *Sweeper) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		s.cur.Close()
		s.cur = nil
	}
}
