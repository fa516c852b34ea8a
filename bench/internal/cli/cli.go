// Package cli is what the benchmark commands share around their run:
// timestamped progress lines, fatal usage errors, and cleanups that run
// once at the end or on SIGINT/SIGTERM, stopping every process started.
package cli

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/farro-dev/farro/bench/internal/sys"
)

var (
	name = "bench"
	t0   = time.Now()

	mu          sync.Mutex
	cleanups    []func()
	cleanupOnce sync.Once
)

// Elapsed is the time since the program started.
func Elapsed() time.Duration { return time.Since(t0) }

// SetName sets the program name used in error messages.
func SetName(n string) { name = n }

// Fatalf reports a usage error and exits with status 2.
func Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, name+": "+format+"\n", args...)
	os.Exit(2)
}

// Logf prints a progress line stamped with the seconds since start.
func Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(t0).Seconds(), fmt.Sprintf(format, args...))
}

// AddCleanup registers f to run at the end, after those added later.
func AddCleanup(f func()) {
	mu.Lock()
	defer mu.Unlock()
	cleanups = append(cleanups, f)
}

// Cleanup stops every process started (sys.StopAll) and runs the
// cleanups, last first, once: a second caller waits for the first.
func Cleanup() {
	cleanupOnce.Do(func() {
		sys.StopAll()
		mu.Lock()
		cs := cleanups
		mu.Unlock()
		for i := len(cs) - 1; i >= 0; i-- {
			cs[i]()
		}
	})
}

// Main runs run with the cleanups wired to its end and to SIGINT/SIGTERM,
// and exits 1 if it fails.
func Main(run func() error) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		Logf("%s: stopping everything", s)
		Cleanup()
		os.Exit(130)
	}()
	err := run()
	Cleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
