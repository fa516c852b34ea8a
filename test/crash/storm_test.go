package crash

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// stormKill is one SIGKILL of an agent by the chaos driver: when, and the
// jobs it was running then.
type stormKill struct {
	at   time.Time
	jobs []string
}

// TestKillStorm runs the release binaries (4 agents with 2 slots each,
// managerd, watchdogd) on one spool while a feeder submits a mix of jobs
// (quick, slow, failing, and some that a scripted operator holds and
// releases or cancels through farroctl) and a chaos driver SIGKILLs a
// random daemon every 20-500 ms, each restarted like systemd's
// Restart=always would. Then the storm stops, the system quiesces, and
// the checker must count no violation. It measures, for each job running
// on a killed agent, the time from the kill to the job being requeued
// (its stale -> queued event).
//
// CI mode storms for 2 minutes (FARRO_STORM_DURATION overrides). Long
// mode (-long, FARRO_CRASH_LONG=1, make crash-long) storms until at least
// 1,000 kills and 10,000 jobs.
func TestKillStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemons for minutes; skipped with -short")
	}
	long := longMode()
	if !long {
		t.Parallel() // the long run storms alone: its figures are the note's
	}
	duration := 2 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("FARRO_STORM_DURATION")); err == nil {
		duration = d
	}
	minKills, minJobs, maxJobs := 0, 0, 1<<30
	if long {
		minKills, minJobs, maxJobs = 1000, 10000, 10000
	}
	c := newCluster(t, binaries(t))
	started := time.Now()

	watchdogArgs := []string{"--interval", "100ms", "--lock-grace", "2s", "--crash-threshold", "10s", "--rescan", "2s"}
	managerArgs := []string{"--max-attempts", "5", "--backoff-base", "50ms", "--backoff-max", "500ms", "--tmp-max-age", "5s", "--rescan", "2s"}
	agentArgs := []string{"--heartbeat", "200ms", "--rescan", "2s", "--drain-timeout", "1s"}
	daemons := []*daemon{
		c.start("watchdogd", "watchdogd", watchdogArgs...),
		c.start("managerd", "managerd", managerArgs...),
	}
	agents := map[*daemon]string{}
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("w%d", i)
		d := c.startAgent(name, agentArgs...)
		daemons = append(daemons, d)
		agents[d] = name
	}

	var (
		stop      atomic.Bool // ends the feeder, operator and chaos
		submitted atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		kills     []stormKill
		opHolds   int
		opCancels int
		refusals  = map[string]int{}
	)
	// opRefused counts why the operator's requests were refused (e.g. the
	// job had already finished), by the first words of the reason.
	opRefused := func(r ctlResult) {
		words := strings.Fields(r.stderr) // "farroctl: <id>: is succeeded (terminal): ..."
		if len(words) > 5 {
			words = words[2:5]
		}
		mu.Lock()
		refusals[strings.Join(words, " ")]++
		mu.Unlock()
	}
	// The feeder keeps about 200 jobs queued.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; !stop.Load() && n < maxJobs; {
			if backlog(c.spool) > 200 {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			for k := 0; k < 50 && n < maxJobs; k++ {
				id := fmt.Sprintf("s%05d", n)
				n++
				c.ledger.attempt(id)
				if _, err := c.spool.Submit(job.SubmitRequest{ID: id, Kind: "exec", Prompt: []byte(stormPrompt(n)), Priority: n % 3, Actor: "feeder"}); err != nil {
					t.Errorf("submit %s: %v", id, err)
					continue
				}
				c.ledger.ack(id)
				submitted.Add(1)
			}
		}
	}()
	// The operator holds and later releases, or cancels, a job picked at
	// random among the last ones submitted, every 100-400 ms.
	wg.Add(1)
	go func() {
		defer wg.Done()
		var held []string
		for !stop.Load() {
			time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
			id := pickLive(c.spool)
			if id == "" {
				continue
			}
			switch r := rand.IntN(10); {
			case r < 2:
				if res := c.ctl("cancel", id); res.code == 0 {
					mu.Lock()
					opCancels++
					mu.Unlock()
				} else {
					opRefused(res)
				}
			case r < 6:
				if res := c.ctl("hold", id); res.code == 0 {
					held = append(held, id)
					mu.Lock()
					opHolds++
					mu.Unlock()
				} else {
					opRefused(res)
				}
			default:
				if len(held) > 0 {
					k := rand.IntN(len(held))
					c.ctl("release", held[k])
					held = append(held[:k], held[k+1:]...)
				}
			}
		}
	}()
	// The chaos driver.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			time.Sleep(time.Duration(20+rand.IntN(481)) * time.Millisecond)
			d := daemons[rand.IntN(len(daemons))]
			var running []string
			if name, ok := agents[d]; ok {
				running = runningOn(c.spool, name)
			}
			at := time.Now()
			if d.kill() && running != nil {
				mu.Lock()
				kills = append(kills, stormKill{at: at, jobs: running})
				mu.Unlock()
			}
		}
	}()
	// The storm lasts its duration (CI) or until the long run's targets.
	lastLog := time.Now()
	for {
		time.Sleep(200 * time.Millisecond)
		k, n := c.killCount(), int(submitted.Load())
		if long {
			if k >= minKills && n >= minJobs || time.Since(started) > time.Hour {
				break
			}
			if time.Since(lastLog) > 30*time.Second {
				lastLog = time.Now()
				t.Logf("storm: %s, %d kills, %d jobs submitted, %d terminal", time.Since(started).Round(time.Second), k, n, terminalCount(c.spool))
			}
			continue
		}
		if time.Since(started) >= duration {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	stormEnd := time.Now()
	kill := c.killCount()
	// The operator's last duty: release whatever is still held (a hold
	// that reached a running job lands when its agent commits it).
	ok := waitUntil(5*time.Minute, func() bool {
		ents, _ := os.ReadDir(c.spool.StateDir(job.Held))
		for _, e := range ents {
			c.ctl("release", e.Name())
		}
		q, _ := c.quiet(true)
		return q
	})
	if !ok {
		_, why := c.quiet(true)
		t.Errorf("not quiet 5 minutes after the storm: %s", why)
	}
	quiesced := time.Since(stormEnd)
	c.stopAll()

	rep := checkSpool(c.spool, c.records, c.ledger)
	reportViolations(t, c, rep)
	lat, toStale, requeued, killedJobs := recoveryLatencies(c.spool, kills)
	reconciles := startupDurations(filepath.Join(c.dir, "logs", "watchdogd.log"))
	attempted, acked := c.ledger.counts()
	summary.addScenario(kill, acked, rep.violations)
	summary.addLatencies(lat)
	mu.Lock()
	summary.addPart(fmt.Sprintf("storm_s=%.0f storm_kills=%d storm_jobs=%d storm_agent_kills_with_jobs=%d storm_holds=%d storm_cancels=%d",
		stormEnd.Sub(started).Seconds(), kill, acked, len(kills), opHolds, opCancels))
	holds, cancels := opHolds, opCancels
	t.Logf("operator requests refused: %v", refusals)
	mu.Unlock()
	line := fmt.Sprintf("kill storm: %s, %d kills (%d of agents running jobs), %d jobs (%d attempted), %d operator holds, %d cancels, quiet %s after the storm; %d jobs requeued after their agent's kill",
		stormEnd.Sub(started).Round(time.Second), kill, len(kills), acked, attempted, holds, cancels, quiesced.Round(time.Second), requeued)
	if len(lat) > 0 {
		p50, p99, mx := percentiles(lat)
		line += fmt.Sprintf(", recovery latency p50 %.0f ms, p99 %.0f ms, max %.0f ms", ms(p50), ms(p99), ms(mx))
		p50, p99, mx = percentiles(toStale)
		line += fmt.Sprintf(" (kill -> stale/ by watchdogd: p50 %.0f ms, p99 %.0f ms, max %.0f ms)", ms(p50), ms(p99), ms(mx))
	}
	if len(reconciles) > 0 {
		p50, _, mx := percentiles(reconciles)
		line += fmt.Sprintf("; %d watchdogd starts, startup reconcile p50 %.0f ms, max %.0f ms", len(reconciles), ms(p50), ms(mx))
	}
	line += fmt.Sprintf(" (%d ended killed out of retries); %s", killedJobs, rep.violations)
	t.Log(line)
	if long && (kill < minKills || acked < minJobs) {
		t.Errorf("long mode: %d kills and %d jobs, want >= %d and >= %d", kill, acked, minKills, minJobs)
	}
}

// reportViolations fails t with the checker's findings (the first 50),
// explains overlapping executions, and checks every daemon log's lines.
func reportViolations(t *testing.T, c *cluster, rep checkReport) {
	t.Helper()
	for i, f := range rep.findings {
		if i == 50 {
			t.Errorf("... and %d more", len(rep.findings)-50)
			break
		}
		t.Errorf("violation: %s", f)
	}
	if rep.Concurrent > 0 {
		c.explainOverlaps(t)
	}
	logs, _ := filepath.Glob(filepath.Join(c.dir, "logs", "*.log"))
	for _, l := range logs {
		checkLogLines(t, l)
	}
}

// stormPrompt is the n-th job's prompt: 70% quick, 15% slow, 15% failing
// often.
func stormPrompt(n int) string {
	switch r := n % 20; {
	case r < 3:
		return fmt.Sprintf(`{"sleep_ms":%d,"fail_rate":0.02}`, 200+rand.IntN(600))
	case r < 6:
		return `{"fail_rate":0.6}`
	default:
		return `{"fail_rate":0.05}`
	}
}

// pickLive returns a job picked at random among the queued and the
// running ones (half the time each), or "".
func pickLive(s *job.Spool) string {
	var names []string
	if rand.IntN(2) == 0 {
		agents, _ := os.ReadDir(s.StateDir(job.InProgress))
		for _, a := range agents {
			ents, _ := os.ReadDir(s.AgentDir(a.Name()))
			for _, e := range ents {
				names = append(names, e.Name())
			}
		}
	} else {
		ents, _ := os.ReadDir(s.StateDir(job.Queued))
		for _, e := range ents {
			names = append(names, e.Name())
		}
	}
	var ids []string
	for _, n := range names {
		if !strings.HasPrefix(n, ".") && !strings.HasSuffix(n, job.LockSuffix) {
			ids = append(ids, n)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return ids[rand.IntN(len(ids))]
}

// runningOn returns the jobs in agent's in-progress directory.
func runningOn(s *job.Spool, agent string) []string {
	var out []string
	ents, _ := os.ReadDir(s.AgentDir(agent))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// backlog counts the jobs in incoming/ (locks excluded).
func backlog(s *job.Spool) int {
	ents, _ := os.ReadDir(s.StateDir(job.Queued))
	n := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), job.LockSuffix) {
			n++
		}
	}
	return n
}

func terminalCount(s *job.Spool) int {
	n := 0
	for _, st := range []job.State{job.Succeeded, job.Killed} {
		ents, _ := os.ReadDir(s.StateDir(st))
		n += len(ents)
	}
	return n
}

// recoveryLatencies measures, for each job running on a killed agent, the
// time from the kill to its requeue: the first stale -> queued event after
// the kill in its events.jsonl (written by managerd when it requeues a job
// that watchdogd moved to stale/). Jobs that finished before the kill
// landed have no such event and are not counted; those out of retries
// (stale -> killed) are counted apart.
//
// toStale is the first half of each of those: from the kill to the
// in-progress -> stale event (watchdogd's part; managerd's is the rest).
func recoveryLatencies(s *job.Spool, kills []stormKill) (lat, toStale []time.Duration, requeued, killed int) {
	for _, k := range kills {
		for _, id := range k.jobs {
			locs, err := s.Locate(id)
			if err != nil || len(locs) != 1 {
				continue
			}
			evs, _ := readEvents(locs[0].Dir)
			var staleAt time.Time
			for _, ev := range evs {
				if !ev.Time.After(k.at) {
					continue
				}
				if ev.From == job.InProgress && ev.To == job.Stale && staleAt.IsZero() {
					staleAt = ev.Time
				}
				if ev.From != job.Stale {
					continue
				}
				if ev.To == job.Queued {
					lat = append(lat, ev.Time.Sub(k.at))
					if !staleAt.IsZero() {
						toStale = append(toStale, staleAt.Sub(k.at))
					}
					requeued++
				} else if ev.To == job.Killed {
					killed++
				}
				break
			}
		}
	}
	return lat, toStale, requeued, killed
}

// startupDurations returns the duration of every startup reconcile pass
// watchdogd logged.
func startupDurations(log string) []time.Duration {
	b, err := os.ReadFile(log)
	if err != nil {
		return nil
	}
	var out []time.Duration
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "startup reconcile done") {
			continue
		}
		var rec struct {
			DurationMS int64 `json:"duration_ms"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil {
			out = append(out, time.Duration(rec.DurationMS)*time.Millisecond)
		}
	}
	return out
}
