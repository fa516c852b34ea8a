//go:build farro_crashpoints

package fsq

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// CrashEnv lists the environment variables this build reads (see
// crashpoint.go; a release build has none).
var CrashEnv = []string{"FARRO_CRASH_POINT", "FARRO_CRASH_SKIP", "FARRO_CRASH_MARK", "FARRO_CRASH_TRACE", "FARRO_DROP_EVENTS"}

// CrashPointsEnabled reports whether this binary was built with the
// farro_crashpoints build tag: this one was, for the crash-simulation
// harness only.
const CrashPointsEnabled = true

// The crash-point configuration, read once from the environment:
//
//	FARRO_CRASH_POINT  the point at which this process SIGKILLs itself
//	FARRO_CRASH_SKIP   let that many hits pass first (default 0)
//	FARRO_CRASH_MARK   file to which the firing point appends
//	                   "<point> <pid> <unix ns>" just before the kill
//	FARRO_CRASH_TRACE  file to which every point reached is appended
//	                   (the harness checks that it knows them all)
//	FARRO_DROP_EVENTS  N > 0: every fsnotify event is dropped, and every
//	                   N-th drop is reported as a queue overflow, as the
//	                   kernel does when its event queue is full
var crash struct {
	point string
	drop  int64
	drops atomic.Int64
	skip  atomic.Int64
	mark  string
	mu    sync.Mutex
	trace *os.File
}

func init() {
	crash.point = os.Getenv("FARRO_CRASH_POINT")
	if n, err := strconv.ParseInt(os.Getenv("FARRO_CRASH_SKIP"), 10, 64); err == nil {
		crash.skip.Store(n)
	}
	crash.mark = os.Getenv("FARRO_CRASH_MARK")
	if n, err := strconv.ParseInt(os.Getenv("FARRO_DROP_EVENTS"), 10, 64); err == nil && n > 0 {
		crash.drop = n
	}
	if p := os.Getenv("FARRO_CRASH_TRACE"); p != "" {
		crash.trace, _ = os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	}
	if crash.point != "" || crash.trace != nil {
		SetObserver(crashObserver)
	}
}

// crashObserver turns the one intermediate state of a pkg/fsq primitive
// that a process crash can leave behind into a point: a lock directory
// made, its owner file not yet written.
func crashObserver(op Op, path, _ string) {
	if op == OpCreate && filepath.Base(path) == OwnerFile && strings.HasSuffix(filepath.Dir(path), ".lock") {
		CrashPoint("fsq/lock-owner:before")
	}
}

// CrashPoint SIGKILLs the calling process if FARRO_CRASH_POINT names this
// point (after FARRO_CRASH_SKIP earlier hits). A qualifier (the target
// state of a commit, the from-to pair of a move) is inserted after the
// transaction name: CrashPoint("commit/rename:before", "succeeded") is
// the point "commit@succeeded/rename:before".
func CrashPoint(name string, qual ...string) {
	if crash.point == "" && crash.trace == nil {
		return
	}
	full := qualify(name, qual)
	if crash.trace != nil {
		crash.mu.Lock()
		_, _ = crash.trace.WriteString(full + "\n")
		crash.mu.Unlock()
	}
	if full != crash.point || crash.skip.Add(-1) >= 0 {
		return
	}
	if crash.mark != "" {
		if f, err := os.OpenFile(crash.mark, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			_, _ = fmt.Fprintf(f, "%s %d %d\n", full, os.Getpid(), time.Now().UnixNano())
			_ = f.Close()
		}
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	for {
		time.Sleep(time.Hour) // the signal is on its way
	}
}

// injectedOverflow reports whether Watch must drop the event it got, and
// whether to report an overflow (a Rescan) in its place.
func injectedOverflow() (drop, overflow bool) {
	if crash.drop == 0 {
		return false, false
	}
	overflow = crash.drops.Add(1)%crash.drop == 0
	if overflow && crash.trace != nil {
		crash.mu.Lock()
		_, _ = crash.trace.WriteString("!fsnotify-overflow-injected\n")
		crash.mu.Unlock()
	}
	return true, overflow
}

func qualify(name string, qual []string) string {
	if len(qual) == 0 || qual[0] == "" {
		return name
	}
	if i := strings.IndexByte(name, '/'); i >= 0 {
		return name[:i] + "@" + qual[0] + name[i:]
	}
	return name + "@" + qual[0]
}
