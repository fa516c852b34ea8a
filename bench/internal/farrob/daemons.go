// Package farrob benchmarks farro itself: the real binaries (agentd,
// managerd, watchdogd, farroctl) on a spool, and pkg/job in process.
package farrob

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/farro-dev/farro/bench/internal/sys"
)

// Bins are farro's four binaries, built from the checkout.
type Bins struct{ Dir string }

// Build compiles farro's binaries from farroRoot into dir.
func Build(farroRoot, dir string) (Bins, error) {
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/...")
	cmd.Dir = farroRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return Bins{}, fmt.Errorf("go build farro: %v: %s", err, out)
	}
	for _, b := range []string{"agentd", "managerd", "watchdogd", "farroctl"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return Bins{}, fmt.Errorf("go build farro: %s missing", b)
		}
	}
	return Bins{Dir: dir}, nil
}

// Path of binary name.
func (b Bins) Path(name string) string { return filepath.Join(b.Dir, name) }

// readyTimeout bounds how long a daemon may take to report ready; large
// spools (a million jobs) make the first pass long.
var readyTimeout = 10 * time.Minute

// Watchdog starts watchdogd on spool with default settings.
func (b Bins) Watchdog(spool, logDir string, args ...string) (*sys.Proc, error) {
	return b.daemon("watchdogd", spool, logDir, "watchdogd", args)
}

// Manager starts managerd on spool with default settings.
func (b Bins) Manager(spool, logDir string, args ...string) (*sys.Proc, error) {
	return b.daemon("managerd", spool, logDir, "managerd", args)
}

// Agent starts agentd --id id --concurrency conc [--exec cmd...].
func (b Bins) Agent(spool, logDir, id string, conc int, execCmd []string) (*sys.Proc, error) {
	args := []string{"--id", id, "--concurrency", strconv.Itoa(conc)}
	if len(execCmd) > 0 {
		args = append(append(args, "--exec"), execCmd...)
	}
	return b.daemon("agentd", spool, logDir, "agentd-"+id, args)
}

func (b Bins) daemon(bin, spool, logDir, name string, args []string) (*sys.Proc, error) {
	full := append([]string{"--spool", spool}, args...)
	cmd := exec.Command(b.Path(bin), full...)
	cmd.Env = cleanEnv()
	log := filepath.Join(logDir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
	return sys.Start(name, cmd, log)
}

// cleanEnv drops FARRO_* variables of the caller's environment, so that
// every daemon runs with its defaults unless the benchmark says otherwise.
func cleanEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "FARRO_") {
			env = append(env, e)
		}
	}
	return env
}

// WaitReady waits for the daemon's "ready" log line and returns how long
// it took from its start.
func WaitReady(p *sys.Proc) (time.Duration, error) {
	t, err := p.WaitLog(context.Background(), `ready"`, readyTimeout)
	if err != nil {
		return 0, err
	}
	return t.Sub(p.Started), nil
}

// Support is the managerd + watchdogd pair every farro run has.
type Support struct {
	WD, MD *sys.Proc
	// Time from start to their "ready" log line (their first full pass).
	WDReady, MDReady time.Duration
}

// StartSupport starts watchdogd and managerd (both with args, e.g.
// --store URL) and waits until both are ready.
func (b Bins) StartSupport(spool, logDir string, args ...string) (*Support, error) {
	wd, err := b.Watchdog(spool, logDir, args...)
	if err != nil {
		return nil, err
	}
	md, err := b.Manager(spool, logDir, args...)
	if err != nil {
		wd.Kill()
		return nil, err
	}
	s := &Support{WD: wd, MD: md}
	if s.WDReady, err = WaitReady(wd); err == nil {
		s.MDReady, err = WaitReady(md)
	}
	if err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Stop stops both (SIGTERM, by PID).
func (s *Support) Stop() {
	s.WD.Stop(syscall.SIGTERM, 10*time.Second)
	s.MD.Stop(syscall.SIGTERM, 10*time.Second)
}
