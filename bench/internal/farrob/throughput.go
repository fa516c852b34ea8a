package farrob

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/pkg/job"
)

// BurnConfig is one burn-down run.
type BurnConfig struct {
	Base        string   // directory the spool is created in
	LogDir      string   // where the daemons' logs go (kept)
	Jobs        int      // N, all queued before the agents start
	Kind        string   // noop or exec
	Agents      int      // agentd processes
	Concurrency int      // --concurrency of each
	Exec        []string // --exec command for exec jobs
	Timeout     time.Duration
}

// BurnResult is what a burn-down measured.
type BurnResult struct {
	Jobs     int
	Elapsed  time.Duration // agents' start to the last job in completed/succeeded
	AgentCPU time.Duration // CPU time of the agents (and their handlers)
	AgentHWM int64         // peak RSS of the largest agent, KiB
}

// Rate is jobs per second.
func (r BurnResult) Rate() float64 { return float64(r.Jobs) / r.Elapsed.Seconds() }

// BurnDown queues cfg.Jobs jobs, starts watchdogd and managerd (waiting
// until they are ready), then starts the agents and times how long it
// takes until every job is in completed/succeeded/, counted by listing
// that directory every 10 ms.
func (b Bins) BurnDown(cfg BurnConfig) (BurnResult, error) {
	root, err := os.MkdirTemp(cfg.Base, "farro-burn-")
	if err != nil {
		return BurnResult{}, err
	}
	defer sys.RemoveTree(root)
	s, err := job.Open(root + "/spool")
	if err != nil {
		return BurnResult{}, err
	}
	if _, err := Fill(s, cfg.Jobs, cfg.Kind, job.Queued, 0); err != nil {
		return BurnResult{}, fmt.Errorf("fill: %w", err)
	}
	sup, err := b.StartSupport(s.Root, cfg.LogDir)
	if err != nil {
		return BurnResult{}, err
	}
	defer sup.Stop()
	var agents []*sys.Proc
	defer func() {
		for _, a := range agents {
			a.Stop(syscall.SIGTERM, 10*time.Second)
		}
	}()
	start := time.Now()
	for i := 0; i < cfg.Agents; i++ {
		a, err := b.Agent(s.Root, cfg.LogDir, fmt.Sprintf("b%d", i+1), cfg.Concurrency, cfg.Exec)
		if err != nil {
			return BurnResult{}, err
		}
		agents = append(agents, a)
	}
	done := s.StateDir(job.Succeeded)
	if err := waitSucceeded("burn-down", func() (int, error) { return CountJobDirs(done, cfg.Jobs) },
		cfg.Jobs, cfg.Timeout, start, agents, cfg.LogDir); err != nil {
		return BurnResult{}, err
	}
	res := BurnResult{Jobs: cfg.Jobs, Elapsed: time.Since(start)}
	for _, a := range agents {
		if c, err := sys.CPUTime(a.PID()); err == nil {
			res.AgentCPU += c
		}
		if m, err := sys.ReadMem(a.PID()); err == nil && m.HWM > res.AgentHWM {
			res.AgentHWM = m.HWM
		}
	}
	for _, st := range []job.State{job.Failed, job.Killed} {
		if n, _ := CountDir(s.StateDir(st)); n > 0 {
			return res, fmt.Errorf("burn-down: %d jobs %s", n, st)
		}
	}
	return res, nil
}

// waitSucceeded polls count every 10 ms until it reaches jobs, and fails
// once timeout has passed since start or as soon as one of the agents
// exits.
func waitSucceeded(what string, count func() (int, error), jobs int, timeout time.Duration, start time.Time, agents []*sys.Proc, logDir string) error {
	deadline := start.Add(timeout)
	for {
		n, err := count()
		if err != nil {
			return err
		}
		if n >= jobs {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d of %d jobs succeeded after %s (logs in %s)", what, n, jobs, timeout, logDir)
		}
		for _, a := range agents {
			if a.Exited() {
				return fmt.Errorf("%s: %s exited (log %s)", what, a.Name, a.Log)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}
