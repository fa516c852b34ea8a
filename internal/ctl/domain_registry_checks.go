package ctl

import (
	"errors"
	"fmt"
	"time"

	"github.com/farro-dev/farro/internal/source"
	"github.com/farro-dev/farro/pkg/job"
)

// releaseDeferred makes the sources whose checks the registry deferred
// (names: the sources that check the reset domain) due again: a reset
// lifts the block for checks as for crawls. It says what it did, for the
// reset's line.
func (c *Ctl) releaseDeferred(s *job.Spool, names []string, now time.Time) string {
	n := 0
	for _, name := range names {
		if source.ValidateName(name) != nil {
			continue // not a source's name: never a path
		}
		released := false
		_, err := source.Update(s, name, now, func(src *source.Source) error {
			if src.Deferred == "" {
				return errNotDeferred
			}
			t := now
			src.Deferred, src.NextCheckAfter, released = "", &t, true
			return nil
		})
		switch {
		case released && err == nil:
			n++
		case err != nil && !errors.Is(err, errNotDeferred) && !errors.Is(err, source.ErrNotFound):
			c.warnf("source %s: %v", name, err)
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d deferred source check(s) due again", n)
}

var errNotDeferred = errors.New("not deferred")
