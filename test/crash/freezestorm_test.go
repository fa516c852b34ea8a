// The freeze storm runs in CI with the rest of test/crash (about 50 s);
// its long mode: FARRO_FREEZE_LONG=1 go test -race -count=1 -timeout 30m
// -run TestFreezeStorm -v ./test/crash/

package crash

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// freezePlan is the size of one freeze storm.
type freezePlan struct {
	agents    int
	jobs      int
	freezes   int           // at least this many SIGSTOPs (0: none, the sanity run)
	freezers  int           // chaos drivers freezing at the same time
	pace      time.Duration // between two submits
	killOneIn int           // 1 chaos action in killOneIn SIGKILLs an agent instead (0: never)
	threshold time.Duration // watchdogd's --crash-threshold
}

// freezePlanFromEnv is the CI plan (3 agents, 60 jobs, 15 freezes: about
// a minute) or, with FARRO_FREEZE_LONG=1, the long one (4 agents, 1,000
// jobs, 200 freezes). FARRO_FREEZE_JOBS, FARRO_FREEZE_FREEZES and
// FARRO_FREEZE_KILLS (1 action in N is a SIGKILL; 0: none) override it.
func freezePlanFromEnv(t *testing.T) freezePlan {
	p := freezePlan{agents: 3, jobs: 60, freezes: 15, freezers: 1, pace: 700 * time.Millisecond, killOneIn: 8, threshold: time.Second}
	if os.Getenv("FARRO_FREEZE_LONG") == "1" {
		p = freezePlan{agents: 4, jobs: 1000, freezes: 200, freezers: 2, pace: 350 * time.Millisecond, killOneIn: 8, threshold: time.Second}
	}
	for name, v := range map[string]*int{"FARRO_FREEZE_JOBS": &p.jobs, "FARRO_FREEZE_FREEZES": &p.freezes, "FARRO_FREEZE_KILLS": &p.killOneIn} {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a count", name, s)
			}
			*v = n
		}
	}
	return p
}

// freezer is the chaos driver of a freeze storm: it SIGSTOPs a daemon for
// longer than the crash threshold and SIGCONTs it, one daemon at a time
// per driver, and now and then SIGKILLs an agent instead (its supervisor
// restarts it with the same --id).
type freezer struct {
	plan    freezePlan
	spool   *job.Spool
	targets []*daemon
	agents  map[*daemon]string // agent -> its id

	mu      sync.Mutex
	frozen  map[*daemon]bool
	byKind  map[string]int // freezes by daemon kind
	freezes int
	kills   int
}

// pick returns a daemon that is not frozen, or nil: 4 times in 5 an
// agent, one running jobs if there is one.
func (f *freezer) pick() *daemon {
	f.mu.Lock()
	defer f.mu.Unlock()
	var agents, busy, others []*daemon
	for _, d := range f.targets {
		name, agent := f.agents[d]
		switch {
		case f.frozen[d]:
		case agent:
			agents = append(agents, d)
			if len(runningOn(f.spool, name)) > 0 {
				busy = append(busy, d)
			}
		default:
			others = append(others, d)
		}
	}
	from := busy
	if len(busy) == 0 {
		from = agents
	}
	if rand.IntN(5) == 0 || len(from) == 0 {
		from = others
	}
	if len(from) == 0 {
		return nil
	}
	d := from[rand.IntN(len(from))]
	f.frozen[d] = true
	return d
}

// act freezes (or kills) one daemon.
func (f *freezer) act() {
	d := f.pick()
	if d == nil {
		return
	}
	defer func() {
		f.mu.Lock()
		delete(f.frozen, d)
		f.mu.Unlock()
	}()
	if _, agent := f.agents[d]; agent && f.plan.killOneIn > 0 && rand.IntN(f.plan.killOneIn) == 0 {
		if d.kill() {
			f.mu.Lock()
			f.kills++
			f.mu.Unlock()
		}
		return
	}
	if !d.signal(syscall.SIGSTOP) {
		return
	}
	f.mu.Lock()
	f.freezes++
	f.byKind[d.kind]++
	f.mu.Unlock()
	time.Sleep(f.plan.threshold + time.Duration(500+rand.IntN(1501))*time.Millisecond)
	d.signal(syscall.SIGCONT)
}

func (f *freezer) counts() (freezes, kills int, byKind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.freezes, f.kills, fmt.Sprintf("agentd %d, managerd %d, watchdogd %d", f.byKind["agentd"], f.byKind["managerd"], f.byKind["watchdogd"])
}

// TestFreezeStorm runs the release binaries (watchdogd with a 1 s crash
// threshold, managerd, 3 agents with 2 slots each) on one spool while a
// feeder submits jobs whose handler sleeps 0.2-3 s and a chaos driver
// SIGSTOPs a daemon (an agent 4 times in 5) for the crash threshold plus
// 0.5-2 s, then SIGCONTs it; 1 action in 8 SIGKILLs an agent instead. A
// frozen agent stops heartbeating, but its handlers (in their own process
// group) keep running: recovering its jobs must not run them a second
// time while the first execution still runs.
//
// The handler's records (outside the spool) give each execution's start
// and end on CLOCK_MONOTONIC, and the end is also written on SIGTERM; the
// checker counts an execution that began before an earlier one of its job
// ended, or while the earlier one still held the job's flock (the kernel's
// word, for an execution SIGKILLed before it could record its end), as an
// overlap. Then: lost, duplicated and stuck jobs, orphan locks, and
// handlers still running once every job is terminal. Every count must be
// zero.
//
// CI mode takes about a minute; FARRO_FREEZE_LONG=1 runs at least 200
// freezes and 1,000 jobs (about 7 minutes: give go test -timeout 30m). FARRO_FREEZE_FREEZES=0 FARRO_FREEZE_KILLS=0 is
// the sanity run: the same load, no chaos, every count zero.
func TestFreezeStorm(t *testing.T) {
	plan := freezePlanFromEnv(t)
	c := newCluster(t, binaries(t))
	started := time.Now()

	watchdogArgs := []string{"--interval", "100ms", "--lock-grace", "2s", "--crash-threshold", plan.threshold.String(), "--rescan", "1s"}
	managerArgs := []string{"--max-attempts", "10", "--backoff-base", "20ms", "--backoff-max", "200ms", "--tmp-max-age", "5s", "--rescan", "1s"}
	f := &freezer{plan: plan, spool: c.spool, agents: map[*daemon]string{}, frozen: map[*daemon]bool{}, byKind: map[string]int{}}
	f.targets = []*daemon{c.start("watchdogd", "watchdogd", watchdogArgs...), c.start("managerd", "managerd", managerArgs...)}
	for i := 1; i <= plan.agents; i++ {
		name := fmt.Sprintf("a%d", i)
		d := c.startAgent(name)
		f.targets = append(f.targets, d)
		f.agents[d] = name
	}

	var (
		stop      atomic.Bool // ends the chaos
		submitted atomic.Int64
		wg        sync.WaitGroup
	)
	// halt ends the chaos and continues every daemon: a stopped process
	// leaves SIGTERM pending until then. Also a cleanup, registered after
	// newCluster's so that it runs before the cluster is killed, when the
	// test ends half-way.
	halt := func() {
		stop.Store(true)
		wg.Wait()
		for _, d := range f.targets {
			d.signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(halt)

	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; n < plan.jobs && !stop.Load(); n++ {
			id := fmt.Sprintf("f%05d", n)
			prompt := fmt.Sprintf(`{"sleep_ms":%d,"fail_rate":0.05}`, 200+rand.IntN(2801))
			c.ledger.attempt(id)
			if _, err := c.spool.Submit(job.SubmitRequest{ID: id, Kind: "exec", Prompt: []byte(prompt), Actor: "feeder"}); err != nil {
				t.Errorf("submit %s: %v", id, err)
				continue
			}
			c.ledger.ack(id)
			submitted.Add(1)
			time.Sleep(plan.pace)
		}
	}()
	if plan.freezes > 0 || plan.killOneIn > 0 {
		for range plan.freezers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					time.Sleep(time.Duration(50+rand.IntN(250)) * time.Millisecond)
					f.act()
				}
			}()
		}
	}
	// The storm lasts until every job is submitted and the freezes done
	// (or its time is up: the counts are then short, which fails).
	limit := time.Duration(plan.jobs)*plan.pace + time.Duration(plan.freezes)*(plan.threshold+3*time.Second) + time.Minute
	lastLog := time.Now()
	for {
		time.Sleep(200 * time.Millisecond)
		freezes, kills, _ := f.counts()
		if int(submitted.Load()) >= plan.jobs && freezes >= plan.freezes || time.Since(started) > limit {
			break
		}
		if time.Since(lastLog) > 30*time.Second {
			lastLog = time.Now()
			t.Logf("freeze storm: %s, %d freezes, %d kills, %d jobs submitted, %d terminal", time.Since(started).Round(time.Second), freezes, kills, submitted.Load(), terminalCount(c.spool))
		}
	}
	halt()
	stormEnd := time.Now()
	c.waitQuiet(2*time.Minute, false)
	quiesced := time.Since(stormEnd)
	strays := strayHandlers(c.records)
	for _, id := range strays {
		t.Errorf("violation: job %s is terminal but a handler still runs it (holds its flock)", id)
	}
	c.stopAll()

	rep := checkSpool(c.spool, c.records, c.ledger)
	reportViolations(t, c, rep)
	freezes, kills, byKind := f.counts()
	attempted, acked := c.ledger.counts()
	silent := loggedLines(filepath.Join(c.dir, "logs", "watchdogd.log"), `"verdict":"silent"`)
	summary.addScenario(kills, acked, rep.violations)
	summary.addPart(fmt.Sprintf("freeze_storm_freezes=%d freeze_storm_overlaps=%d", freezes, rep.overlapRuns))
	t.Logf("freeze storm: %s, quiet %s later; freezes=%d (%s) kills=%d jobs=%d (%d attempted) executions=%d reruns=%d overlaps=%d (in %d jobs) unended=%d silent_recoveries=%d lost=%d duplicated=%d stuck=%d orphan_locks=%d stray_handlers=%d; %s",
		stormEnd.Sub(started).Round(time.Second), quiesced.Round(time.Second), freezes, byKind, kills, acked, attempted,
		rep.executions, rep.reruns, rep.overlapRuns, rep.Concurrent, rep.unended, silent,
		rep.Lost, rep.Duplicated, rep.NotTerminal, rep.OrphanLocks, len(strays), rep.violations)
	if freezes < plan.freezes || acked < plan.jobs {
		t.Errorf("%d freezes and %d jobs, want >= %d and >= %d", freezes, acked, plan.freezes, plan.jobs)
	}
}

// strayHandlers returns the jobs whose flock (records/<id>.flock, held by
// every live execution of the test handler) is taken: with every job
// terminal, a handler that still runs.
func strayHandlers(records string) []string {
	paths, _ := filepath.Glob(filepath.Join(records, "*.flock"))
	var out []string
	for _, p := range paths {
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			out = append(out, strings.TrimSuffix(filepath.Base(p), ".flock"))
		}
		_ = syscall.Close(fd)
	}
	return out
}

// loggedLines counts the occurrences of s in file (one a line for a
// field of a JSON log line).
func loggedLines(file, s string) int {
	b, _ := os.ReadFile(file)
	return bytes.Count(b, []byte(s))
}
