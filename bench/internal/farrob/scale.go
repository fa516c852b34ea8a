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
	"github.com/farro-dev/farro/pkg/store/spoolstore"
)

// ScaleResult is what one queue size measured.
type ScaleResult struct {
	Queued int
	Fill   time.Duration // the fixture's time to queue them (not a farro figure)

	// Spool.Claim in process, oldest jobs first, no daemon running: the
	// claim transaction's own cost at this depth.
	Claim stats.Latency

	// The daemons on the full queue (plus Deferred jobs in deferred/, not
	// due for an hour).
	Deferred int
	// watchdogd start to the stale/ transition of a job whose holder was
	// SIGKILLed before it started (its events.jsonl), and to the end of its
	// startup pass over the spool ("startup reconcile done").
	WDRecover, WDPass time.Duration
	// CPU (utime+stime) of watchdogd and managerd over IdleWindow once
	// both are ready and the startup pass is done, no agent running
	// (ms per second).
	IdleWD, IdleMD float64
	// agentd (--concurrency 1, its default) start to its claim of the
	// job submitted last with priority PrioJobPriority (the claim's event
	// in events.jsonl); FirstClaim is the job of agentd's first
	// queued -> in-progress transition (its log).
	PrioClaim  time.Duration
	PrioID     string
	FirstClaim string

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
	// CPU over IdleWindow with N jobs in completed/succeeded/ and an
	// idle agentd (--concurrency 4), after watchdogd's startup pass (ms
	// per second).
	DoneIdleAgent, DoneIdleMD, DoneIdleWD float64
}

// PrioJobPriority is the priority of the job the scale run submits last.
const PrioJobPriority = 5

// ScaleConfig is one scale run.
type ScaleConfig struct {
	Base, LogDir string
	Queued       int // jobs queued
	Claims       int // in-process claims timed
	BurnJobs     int // jobs burnt by agentd at depth
	// Deferred jobs (not_before an hour ahead) beside the queue, for
	// managerd's rescans of deferred/; IdleWindow the window the idle CPU
	// is measured over (0: not measured).
	Deferred   int
	IdleWindow time.Duration
	Logf       func(string, ...any)
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
	if cfg.Deferred > 0 {
		if _, err := FillDeferred(s, cfg.Deferred, "noop", time.Now().Add(time.Hour)); err != nil {
			return err
		}
		r.Deferred = cfg.Deferred
	}
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

	// A job held by a dead agent (the newest queued one), then the
	// priority job, submitted through pkg/job as farroctl does, with its hint.
	dead := ids[len(ids)-1]
	if err := DeadHolder(s.Root, dead); err != nil {
		return err
	}
	pj, err := s.Submit(job.SubmitRequest{Kind: "noop", Priority: PrioJobPriority, Prompt: []byte(`{}`), Actor: "bench/scale"})
	if err != nil {
		return err
	}
	r.PrioID = pj.ID

	sup, err := b.StartSupport(s.Root, cfg.LogDir)
	if err != nil {
		return err
	}
	defer sup.Stop()
	r.WDReady, r.MDReady = sup.WDReady, sup.MDReady
	staleAt, err := WaitEvent(s, dead, job.Stale, sup.WD, readyTimeout)
	if err != nil {
		return fmt.Errorf("scale %d: dead agent's job: %w", cfg.Queued, err)
	}
	r.WDRecover = staleAt.Sub(sup.WD.Started)
	passAt, err := sup.WD.WaitLog(context.Background(), `startup reconcile done`, readyTimeout)
	if err != nil {
		return err
	}
	r.WDPass = passAt.Sub(sup.WD.Started)
	cfg.logf("scale %d: watchdogd recovered the dead agent's job %s after its start, startup pass done after %s",
		cfg.Queued, r.WDRecover.Round(time.Millisecond), r.WDPass.Round(time.Millisecond))
	if cfg.IdleWindow > 0 {
		cpu, err := IdleCPU(cfg.IdleWindow, sup.WD, sup.MD)
		if err != nil {
			return err
		}
		r.IdleWD, r.IdleMD = cpu[0], cpu[1]
		cfg.logf("scale %d: idle CPU over %s: watchdogd %.2f, managerd %.2f ms/s", cfg.Queued, cfg.IdleWindow, cpu[0], cpu[1])
	}

	// agentd with its default concurrency: one slot, so that its claims
	// and its log's transitions come in the same order.
	p1, err := b.Agent(s.Root, cfg.LogDir, "p1", 1, nil)
	if err != nil {
		return err
	}
	claimAt, err := WaitEvent(s, pj.ID, job.InProgress, p1, readyTimeout)
	if err != nil {
		p1.Stop(syscall.SIGTERM, 30*time.Second)
		return fmt.Errorf("scale %d: priority job: %w", cfg.Queued, err)
	}
	r.PrioClaim = claimAt.Sub(p1.Started)
	deadline := time.Now().Add(time.Minute)
	for r.FirstClaim == "" {
		id, ok, err := FirstTransition(p1.Log, job.InProgress)
		if err != nil {
			p1.Stop(syscall.SIGTERM, 30*time.Second)
			return err
		}
		if ok {
			r.FirstClaim = id
			break
		}
		if p1.Exited() || time.Now().After(deadline) {
			p1.Stop(syscall.SIGTERM, 30*time.Second)
			return fmt.Errorf("scale %d: no transition to in-progress in agentd's log (log %s)", cfg.Queued, p1.Log)
		}
		time.Sleep(2 * time.Millisecond)
	}
	p1Mem, _ := sys.ReadMem(p1.PID())
	cfg.logf("scale %d: memory: agentd --concurrency 1 %s", cfg.Queued, MemDetail(p1.PID()))
	p1.Stop(syscall.SIGTERM, 30*time.Second)
	cfg.logf("scale %d: priority job claimed %s after agentd's start; first claim %s (priority job %s)",
		cfg.Queued, r.PrioClaim.Round(time.Millisecond), r.FirstClaim, pj.ID)

	done := s.StateDir(job.Succeeded)
	before, err := CountDir(done)
	if err != nil {
		return err
	}
	a, err := b.Agent(s.Root, cfg.LogDir, "s1", 4, nil)
	if err != nil {
		return err
	}
	defer a.Stop(syscall.SIGTERM, 30*time.Second)
	// agentd claims while it is still building its index, so its first
	// job is timed from its start; the burn at depth from its "ready".
	readyc := make(chan error, 1)
	go func() {
		d, err := WaitReady(a)
		r.AgentReady = d
		readyc <- err
	}()
	deadline = time.Now().Add(10 * time.Minute)
	for r.FirstJob == 0 {
		n, err := CountDir(done)
		if err != nil {
			return err
		}
		if n > before {
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
	cfg.logf("scale %d: agentd ready after %s, %d jobs done; timing the next %d", cfg.Queued, r.AgentReady.Round(time.Millisecond), n0-before, burn)
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
	r.AgentMem.HWM = max(r.AgentMem.HWM, p1Mem.HWM) // both agentd runs on this queue
	r.MDMem, _ = sys.ReadMem(sup.MD.PID())
	r.WDMem, _ = sys.ReadMem(sup.WD.PID())
	cfg.logf("scale %d: memory: agentd %s; managerd %s; watchdogd %s", cfg.Queued, MemDetail(a.PID()), MemDetail(sup.MD.PID()), MemDetail(sup.WD.PID()))
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
	m := manager.New(spoolstore.New(s), manager.Config{}, nop)
	if r.MDCycle1, err = timed(m.RunOnce); err != nil {
		return err
	}
	if r.MDCycle2, err = timed(m.RunOnce); err != nil {
		return err
	}
	mr := manager.New(spoolstore.New(s), manager.Config{Retention: 720 * time.Hour}, nop)
	if r.MDRetentionCycle, err = timed(mr.RunOnce); err != nil {
		return err
	}
	w := watchdog.New(spoolstore.New(s), watchdog.Config{}, nop)
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
	if cfg.IdleWindow > 0 {
		a, err := b.Agent(s.Root, cfg.LogDir, "c1", 4, nil)
		if err != nil {
			return err
		}
		defer a.Stop(syscall.SIGTERM, 30*time.Second)
		if _, err := WaitReady(a); err != nil {
			return err
		}
		if _, err := sup.WD.WaitLog(ctx, `startup reconcile done`, readyTimeout); err != nil {
			return err
		}
		cpu, err := IdleCPU(cfg.IdleWindow, a, sup.MD, sup.WD)
		if err != nil {
			return err
		}
		r.DoneIdleAgent, r.DoneIdleMD, r.DoneIdleWD = cpu[0], cpu[1], cpu[2]
		cfg.logf("scale %d: completed/: idle CPU over %s: agentd %.2f, managerd %.2f, watchdogd %.2f ms/s", cfg.Queued, cfg.IdleWindow, cpu[0], cpu[1], cpu[2])
	}
	r.DoneWDMem, _ = sys.ReadMem(sup.WD.PID())
	r.DoneMDMem, _ = sys.ReadMem(sup.MD.PID())
	cfg.logf("scale %d: completed/: memory: managerd %s; watchdogd %s", cfg.Queued, MemDetail(sup.MD.PID()), MemDetail(sup.WD.PID()))
	return nil
}
