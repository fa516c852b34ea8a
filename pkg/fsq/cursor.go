package fsq

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// DirCursor lists a directory a batch at a time, each batch resuming
// where the previous one stopped, so that a periodic pass over a
// directory of a million entries costs a bounded amount per period
// instead of a full listing. One walk from the first entry to the end is
// a lap; the batch that ends a lap closes the directory and the next one
// starts a new lap. Entries are classified as ScanDir does (dot files
// skipped, symlinks and other non-directories in Hostile), in the
// directory's own order, not sorted. An entry added or removed during a
// lap may or may not be seen in that lap; every entry present for a
// whole lap is seen in it. Not safe for concurrent use.
type DirCursor struct {
	dir string
	f   *os.File
}

// NewDirCursor returns a cursor over dir; nothing is opened yet.
func NewDirCursor(dir string) *DirCursor { return &DirCursor{dir: dir} }

// Next returns up to n entries (n < 1 means 4096) and whether the
// listing reached the end with them: the lap is done, and the next call
// starts over. A missing directory is an empty lap. On an error the lap
// is abandoned (the next call starts over) and end is true.
func (c *DirCursor) Next(n int) (out Entries, end bool, err error) {
	if n < 1 {
		n = 4096
	}
	if c.f == nil {
		f, err := os.Open(c.dir)
		if err != nil {
			if os.IsNotExist(err) {
				return out, true, nil
			}
			return out, true, fmt.Errorf("scan %s: %w", c.dir, err)
		}
		c.f = f
	}
	for len(out.Dirs)+len(out.Hostile) < n {
		des, rerr := c.f.ReadDir(n - len(out.Dirs) - len(out.Hostile))
		for _, de := range des {
			name := de.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			if de.Type().IsDir() {
				out.Dirs = append(out.Dirs, name)
			} else {
				out.Hostile = append(out.Hostile, name)
			}
		}
		if rerr != nil || len(des) == 0 {
			c.Close()
			if rerr != nil && !errors.Is(rerr, io.EOF) {
				return out, true, fmt.Errorf("scan %s: %w", c.dir, rerr)
			}
			return out, true, nil
		}
	}
	return out, false, nil
}

// Close ends the current lap (the next Next starts over) and releases
// the directory.
func (c *DirCursor) Close() {
	if c.f != nil {
		_ = c.f.Close()
		c.f = nil
	}
}
