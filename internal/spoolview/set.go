package spoolview

import (
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"slices"
	"strings"
)

// nameSet is the set of names in one directory, kept so that a count is
// exact although a name's appearance may be reported twice (by a listing
// and by an event that was still in flight when the listing was made) and
// its disappearance too. It holds the 64-bit hashes of the last listing
// (8 bytes a name, sorted) plus an overlay of the changes seen since.
type nameSet struct {
	base []uint64        // sorted hashes of the last listing
	over map[uint64]bool // changes since the listing: true present, false absent
	n    int
}

func hashName(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}

func (s *nameSet) has(h uint64) bool {
	if p, ok := s.over[h]; ok {
		return p
	}
	_, found := slices.BinarySearch(s.base, h)
	return found
}

// add records name as present; it reports whether it was absent.
func (s *nameSet) add(name string) bool {
	h := hashName(name)
	if s.has(h) {
		return false
	}
	s.n++
	s.set(h, true) // may compact, which recomputes n
	return true
}

// remove records name as absent; it reports whether it was present.
func (s *nameSet) remove(name string) bool {
	h := hashName(name)
	if !s.has(h) {
		return false
	}
	s.n--
	s.set(h, false)
	return true
}

func (s *nameSet) set(h uint64, present bool) {
	if s.over == nil {
		s.over = map[uint64]bool{}
	}
	s.over[h] = present
	if len(s.over) > 4096+len(s.base)/4 {
		s.compact()
	}
}

// compact folds the overlay into the sorted base.
func (s *nameSet) compact() {
	base := make([]uint64, 0, s.n)
	for _, h := range s.base {
		if p, ok := s.over[h]; !ok || p {
			base = append(base, h)
		}
	}
	for h, p := range s.over {
		if _, found := slices.BinarySearch(s.base, h); p && !found {
			base = append(base, h)
		}
	}
	slices.Sort(base)
	s.base, s.over = base, nil
	s.n = len(base)
}

// reset replaces the set with a fresh listing.
func (s *nameSet) reset(names []string) {
	base := make([]uint64, 0, len(names))
	for _, n := range names {
		base = append(base, hashName(n))
	}
	s.resetHashes(base)
}

// resetHashes replaces the set with a listing given as hashes (reordered).
func (s *nameSet) resetHashes(base []uint64) {
	slices.Sort(base)
	s.base, s.over = slices.Compact(base), nil
	s.n = len(s.base)
}

// listHashes lists the subdirectories of dir as name hashes, the way
// fsq.ScanDir lists them (no dot names, no symlinks, nothing but
// directories) but without keeping or sorting the names: a relisting of a
// million jobs then costs one readdir and 8 MB.
func listHashes(dir string) ([]uint64, error) {
	f, err := os.Open(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("scan %s: %w", dir, err)
	}
	defer f.Close()
	var out []uint64
	for {
		des, err := f.ReadDir(4096)
		for _, de := range des {
			if name := de.Name(); !strings.HasPrefix(name, ".") && de.Type().IsDir() {
				out = append(out, hashName(name))
			}
		}
		if err != nil || len(des) == 0 {
			if err != nil && err != io.EOF {
				return nil, fmt.Errorf("scan %s: %w", dir, err)
			}
			return out, nil
		}
	}
}

func (s *nameSet) len() int { return s.n }
