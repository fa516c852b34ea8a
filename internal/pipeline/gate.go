package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/pkg/fsq"
	"github.com/farro-dev/farro/pkg/job"
)

// GatesDir holds, per domain, the earliest time the next source check may
// start (<spool>/pipeline/gates/<domain>), read and advanced under
// flock(2) by every check handler in every agent: the staggered
// not_before of a run's jobs spaces their starts, the gate spaces the
// requests themselves (an agent may claim a job late, a retry may come
// early).
var GatesDir = filepath.Join("pipeline", "gates")

// passGate waits until domain's gate allows a request and returns with
// the gate held: the caller makes its request, then calls done with the
// time the request was sent, which moves the gate to that time plus the
// interval and releases it. Checks of one domain therefore go one at a
// time, each at least interval after the previous one was sent.
func passGate(ctx context.Context, sp *job.Spool, domain string, interval time.Duration) (done func(sent time.Time), err error) {
	if interval <= 0 {
		return func(time.Time) {}, nil
	}
	dir := sp.Path(GatesDir)
	if err := fsq.MkdirDurable(dir); err != nil {
		return nil, fmt.Errorf("gates: %w", err)
	}
	name := strings.NewReplacer("/", "%2F", "\x00", "").Replace(domain)
	if name == "" || name[0] == '.' {
		name = "%" + name
	}
	l, err := crawl.LockFile(filepath.Join(dir, name), false, time.Minute)
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, name+".next")
	if b, err := os.ReadFile(p); err == nil {
		if ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			if wait := time.Until(time.Unix(0, ns)); wait > 0 {
				if wait > interval {
					wait = interval // a clock step back must not stall checks
				}
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					l.Unlock()
					return nil, ctx.Err()
				case <-t.C:
				}
			}
		}
	}
	return func(sent time.Time) {
		defer l.Unlock()
		if sent.IsZero() {
			sent = time.Now()
		}
		next := sent.Add(interval).UnixNano()
		_ = os.WriteFile(p, []byte(strconv.FormatInt(next, 10)+"\n"), 0o644) // best effort: the lock spaced this one
	}, nil
}
