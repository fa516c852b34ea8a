package crawl_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/farro-dev/farro/internal/crawl"
	"github.com/farro-dev/farro/internal/testsite"
)

// TestCrawlCrashRecovery SIGKILLs managerd (and with it the frontier),
// the agents and once watchdogd several times during a crawl, restarts
// them, and checks from the site's access log that the crawl still
// fetches exactly the expected set of URLs, that a URL is fetched again
// only if a kill happened after its previous request started (it was in
// flight), that no more URLs are refetched than were in flight, and that
// the politeness interval held across the restarts.
func TestCrawlCrashRecovery(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	opts := testsite.Options{Plain: true, Fanout: 4, Levels: 4, ExtraHosts: 3, ExtraPages: 40}
	s := startSite(t, bin, dir, opts, "--plain", "--fanout", "4", "--levels", "4", "--extra-hosts", "3", "--extra-pages", "40")
	f := newFarro(t, bin, dir)
	f.startWatchdog()
	f.startManager()
	const agents, slots = 2, 3
	f.startAgents(agents, slots)

	seeds := []string{s.url(testsite.HostA, "/"), s.url(testsite.HostB, "/"), s.url(testsite.HostC, "/")}
	for i := 1; i <= 3; i++ {
		seeds = append(seeds, s.url(fmt.Sprintf("t%d.site.test", i), "/"))
	}
	args := crawlArgs(s, "crash", "--scope", "domain", "--max-depth", "3", "--delay", "30ms", "--max-in-flight-per-domain", "2",
		"--max-attempts", "10", "--timeout", "2s")
	for _, sd := range seeds[1:] {
		args = append(args, "--seed", sd)
	}
	start := time.Now()
	f.ctl(args...)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var kills []time.Time
	for round := 0; round < 4; round++ {
		time.Sleep(time.Duration(400+rng.IntN(500)) * time.Millisecond)
		if f.state("crash").State == crawl.Done {
			break
		}
		f.manager.kill()
		for _, a := range f.agents {
			a.kill()
		}
		if round == 1 {
			f.watchdog.kill()
		}
		kills = append(kills, time.Now())
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		if round == 1 {
			f.watchdog.start(t)
		}
		f.manager.start(t)
		for _, a := range f.agents {
			a.start(t)
		}
	}
	f.waitState("crash", crawl.Done, 120*time.Second)
	elapsed := time.Since(start)
	t.Logf("%d kills of managerd and the agents", len(kills))

	log := s.log(t)
	exp := s.model.Expected(testsite.ExpectOptions{Seeds: seeds, MaxDepth: 3, UserAgent: testsite.UserAgent, ObeyRobots: true})
	// The set of URLs is exactly the expected one...
	counts := testsite.Counts(pages(log))
	var missing, extra []string
	for k := range exp.Fetched {
		if counts[k] == 0 {
			missing = append(missing, k)
		}
	}
	for k := range counts {
		if !exp.Fetched[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("fetched set differs: %d missing %v, %d unexpected %v", len(missing), missing, len(extra), extra)
	}
	// ... and a URL (robots.txt included) was requested again only after
	// a kill that came after its previous request started.
	byURL := map[string][]testsite.Request{}
	for _, r := range log {
		byURL[r.Host+r.URI] = append(byURL[r.Host+r.URI], r)
	}
	refetched := 0
	for u, rs := range byURL {
		for i := 1; i < len(rs); i++ {
			refetched++
			justified := false
			for _, k := range kills {
				if !k.Before(rs[i-1].Start) && k.Before(rs[i].Start) {
					justified = true
				}
			}
			if !justified {
				t.Errorf("%s requested again at %s without a kill since its request at %s", u,
					rs[i].Start.Format("15:04:05.000"), rs[i-1].Start.Format("15:04:05.000"))
			}
		}
	}
	if max := len(kills) * agents * slots; refetched > max {
		t.Errorf("%d refetches for %d kills of %d agents x %d slots: more than were in flight", refetched, len(kills), agents, slots)
	}
	for _, g := range testsite.CloseGaps(log, func(string) time.Duration { return 30 * time.Millisecond }, serverTolerance) {
		t.Errorf("too close: %s", g)
	}
	sum := f.status("crash")
	if sum.Fetched != int64(len(exp.Fetched)) || sum.InFlight != 0 || sum.Pending != 0 {
		t.Errorf("status: fetched %d, in flight %d, pending %d; want %d, 0, 0", sum.Fetched, sum.InFlight, sum.Pending, len(exp.Fetched))
	}
	t.Logf("%d URLs, %d requests (%d refetched after kills) in %s: %.1f pages/s", len(exp.Fetched), len(log), refetched,
		elapsed.Round(time.Millisecond), float64(len(pages(log)))/elapsed.Seconds())
}
