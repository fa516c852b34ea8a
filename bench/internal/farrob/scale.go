package farrob

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/farro-dev/farro/bench/internal/stats"
	"github.com/farro-dev/farro/bench/internal/sys"
	"github.com/farro-dev/farro/internal/manager"
	"github.com/farro-dev/farro/internal/watchdog"
	"github.com/farro-dev/farro/pkg/job"
)

// ScaleResult is what one queue size measured.
type ScaleResult struct {
	Queued int
	Fill   time.Duration // the fixture's time to queue them (not a farro figure)

	// Spool.Claim in process, oldest jobs first, no daemon running: the
	// claim transaction's own cost at this depth.
	Claim stats.Latency

	// The daemons on the full queue.
	WDReady, MDReady, AgentReady time.Duration // start to "ready" (first pass / index built)
	FirstJob                     time.Duration // agentd start to its first job succeeded
	Burn                         BurnResult    // the next jobs at this depth (one agentd, --concurrency 4)
	AgentMem, MDMem, WDMem       sys.Mem       // after the burn

	// Cycle time with Queued jobs in completed/succeeded/ (in process,
	// internal/manager and internal/watchdog with default settings).
	MDCycle1, MDCycle2       time.Duration // first and second RunOnce
	MDRetentionCycle         time.Duration // RunOnce with --retention 720h (scans completed/, removes nothing)
	WDCycle1, WDCycle2       time.Duration // first RunOnce includes the startup reconcile
	DoneWDReady, DoneMDReady time.Duration
	DoneWDMem, DoneMDMem     sys.Mem
}

// ScaleConfig is one scale run.
type ScaleConfig struct {
	Base, LogDir string
	Queued       int // jobs queued
	Claims       int // in-process claims timed
	BurnJobs     int // jobs burnt by agentd at depth
	Logf         func(string, ...any)
}

func (c ScaleConfig) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// Scale measures claim latency, daemon readiness and RSS with
// cfg.Queued jobs queued, then manager and watchdog cycle times and RSS
// with as many jobs in completed/succeeded/.
//
// Both spools are removed only at the end: on ext4 without a journal,
// creating inodes soon after deleting many is slow (recently_deleted()),
// which would slow the second fixture, not farro.
func (b Bins) Scale(cfg ScaleConfig) (ScaleResult, error) {
	r := ScaleResult{Queued: cfg.Queued}
	var roots []string
	defer func() {
		for _, root := range roots {
			_ = sys.RemoveTree(root)
		}
	}()
	if err := b.scaleQueued(cfg, &r, &roots); err != nil {
		return r, err
	}
	cfg.logf("scale %d: queue measured", cfg.Queued)
	if err := b.scaleCompleted(cfg, &r, &roots); err != nil {
		return r, err
	}
	cfg.logf("scale %d: completed/ measured; removing both spools", cfg.Queued)
	return r, nil
}

func (b Bins) scaleQueued(cfg ScaleConfig, r *ScaleResult, roots *[]string) error {
	root, s, err := newSpool(cfg.Base, "farro-scale-q-")
	if err != nil {
		return err
	}
	*roots = append(*roots, root)
	t := time.Now()
	ids, err := Fill(s, cfg.Queued, "noop", job.Queued, 0)
	if err != nil {
		return err
	}
	r.Fill = time.Since(t)
	cfg.logf("scale %d: queued in %s; timing %d claims", cfg.Queued, r.Fill.Round(time.Millisecond), min(cfg.Claims, cfg.Queued/2))

	claims := min(cfg.Claims, cfg.Queued/2)
	h := job.Holder{Actor: "bench/scale", Agent: "scale"}
	var lat []time.Duration
	for _, id := range ids[:claims] {
		t := time.Now()
		c, err := s.Claim(id, h)
		if err != nil {
			return fmt.Errorf("claim %s: %w", id, err)
		}
		lat = append(lat, time.Since(t))
		if err := c.Commit(job.Succeeded, "", nil); err != nil {
			return err
		}
	}
	r.Claim = stats.Lat(lat)

	sup, err := b.StartSupport(s.Root, cfg.LogDir)
	if err != nil {
		return err
	}
	defer sup.Stop()
	r.WDReady, r.MDReady = sup.WDReady, sup.MDReady
	a, err := b.Agent(s.Root, cfg.LogDir, "s1", 4, nil)
	if err != nil {
		return err
	}
	defer a.Stop(syscall.SIGTERM, 30*time.Second)
	done := s.StateDir(job.Succeeded)
	// agentd claims while it is still building its index, so its first
	// job is timed from its start; the burn at depth from its "ready".
	readyc := make(chan error, 1)
	go func() {
		d, err := WaitReady(a)
		r.AgentReady = d
		readyc <- err
	}()
	deadline := time.Now().Add(10 * time.Minute)
	for r.FirstJob == 0 {
		n, err := CountDir(done)
		if err != nil {
			return err
		}
		if n > claims {
			r.FirstJob = time.Since(a.Started)
			break
		}
		if a.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("scale %d: no job done by agentd (log %s)", cfg.Queued, a.Log)
		}
		time.Sleep(time.Millisecond)
	}
	if err := <-readyc; err != nil {
		return err
	}
	n0, err := CountDir(done)
	if err != nil {
		return err
	}
	burn := min(cfg.BurnJobs, cfg.Queued-n0)
	burnStart := time.Now()
	cpu0, _ := sys.CPUTime(a.PID())
	cfg.logf("scale %d: agentd ready after %s, %d jobs done; timing the next %d", cfg.Queued, r.AgentReady.Round(time.Millisecond), n0-claims, burn)
	for burn > 0 {
		n, err := CountDir(done)
		if err != nil {
			return err
		}
		if n >= n0+burn {
			break
		}
		if a.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("scale %d: %d of %d jobs done (log %s)", cfg.Queued, n-n0, burn, a.Log)
		}
		time.Sleep(2 * time.Millisecond)
	}
	r.Burn = BurnResult{Jobs: burn, Elapsed: time.Since(burnStart)}
	if c, err := sys.CPUTime(a.PID()); err == nil {
		r.Burn.AgentCPU = c - cpu0
	}
	r.AgentMem, _ = sys.ReadMem(a.PID())
	r.MDMem, _ = sys.ReadMem(sup.MD.PID())
	r.WDMem, _ = sys.ReadMem(sup.WD.PID())
	return nil
}

func (b Bins) scaleCompleted(cfg ScaleConfig, r *ScaleResult, roots *[]string) error {
	root, s, err := newSpool(cfg.Base, "farro-scale-c-")
	if err != nil {
		return err
	}
	*roots = append(*roots, root)
	if _, err := Fill(s, cfg.Queued, "noop", job.Succeeded, 0); err != nil {
		return err
	}
	cfg.logf("scale %d: %d jobs in completed/succeeded/; timing managerd and watchdogd passes", cfg.Queued, cfg.Queued)
	ctx := context.Background()
	nop := zerolog.Nop()
	timed := func(f func(context.Context) error) (time.Duration, error) {
		t := time.Now()
		err := f(ctx)
		return time.Since(t), err
	}
	m := manager.New(s, manager.Config{}, nop)
	if r.MDCycle1, err = timed(m.RunOnce); err != nil {
		return err
	}
	if r.MDCycle2, err = timed(m.RunOnce); err != nil {
		return err
	}
	mr := manager.New(s, manager.Config{Retention: 720 * time.Hour}, nop)
	if r.MDRetentionCycle, err = timed(mr.RunOnce); err != nil {
		return err
	}
	w := watchdog.New(s, watchdog.Config{}, nop)
	if r.WDCycle1, err = timed(w.RunOnce); err != nil {
		return err
	}
	if r.WDCycle2, err = timed(w.RunOnce); err != nil {
		return err
	}
	if n, _ := CountDir(s.StateDir(job.Succeeded)); n != cfg.Queued {
		return fmt.Errorf("scale: %d jobs left in completed/succeeded, want %d", n, cfg.Queued)
	}
	sup, err := b.StartSupport(s.Root, cfg.LogDir)
	if err != nil {
		return err
	}
	defer sup.Stop()
	r.DoneWDReady, r.DoneMDReady = sup.WDReady, sup.MDReady
	r.DoneWDMem, _ = sys.ReadMem(sup.WD.PID())
	r.DoneMDMem, _ = sys.ReadMem(sup.MD.PID())
	return nil
}
