package crash

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// longFlag (or FARRO_CRASH_LONG=1) selects the long mode: the kill storm
// runs until at least 1,000 kills and 10,000 jobs (make crash-long).
var longFlag = flag.Bool("long", false, "long mode: kill storm with >= 1,000 kills and 10,000 jobs (also FARRO_CRASH_LONG=1)")

func longMode() bool {
	return *longFlag || os.Getenv("FARRO_CRASH_LONG") == "1"
}

// runSummary gathers the figures of every part of one run of the package,
// printed as one line when the run ends (and written to the file named by
// FARRO_CRASH_SUMMARY, if set).
type runSummary struct {
	mu              sync.Mutex
	pointsKnown     int
	pointsExercised int
	powerLossStates int
	kills           int
	jobs            int
	v               violations
	latencies       []time.Duration // agent kill -> its job requeued
	parts           []string
}

var summary = &runSummary{}

// addScenario adds one scenario's kills, jobs and counts.
func (s *runSummary) addScenario(kills, jobs int, v violations) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kills += kills
	s.jobs += jobs
	s.v.add(v)
}

// addPoints records the crash-point coverage.
func (s *runSummary) addPoints(known, exercised int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pointsKnown, s.pointsExercised = known, exercised
}

// addPowerLoss adds the power-loss enumeration's states and counts.
func (s *runSummary) addPowerLoss(states int, v violations) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.powerLossStates += states
	s.v.add(v)
}

// addLatencies adds recovery latencies measured by a kill storm.
func (s *runSummary) addLatencies(d []time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latencies = append(s.latencies, d...)
}

// addPart adds a free-form "name=value" item to the line.
func (s *runSummary) addPart(part string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parts = append(s.parts, part)
}

func (s *runSummary) line() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	mode := "ci"
	if longMode() {
		mode = "long"
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, "farro crash summary: mode=%s crash_points=%d/%d power_loss_states=%d kills=%d jobs=%d %s",
		mode, s.pointsExercised, s.pointsKnown, s.powerLossStates, s.kills, s.jobs, s.v)
	if len(s.latencies) > 0 {
		p50, p99, max := percentiles(s.latencies)
		fmt.Fprintf(b, " recovery_ms_p50=%.0f recovery_ms_p99=%.0f recovery_ms_max=%.0f recoveries=%d",
			ms(p50), ms(p99), ms(max), len(s.latencies))
	}
	for _, p := range s.parts {
		b.WriteString(" " + p)
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentiles returns the p50, p99 and max of ds (nearest rank).
func percentiles(ds []time.Duration) (p50, p99, max time.Duration) {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(s) {
			i = len(s) - 1
		}
		return s[i]
	}
	return rank(0.50), rank(0.99), s[len(s)-1]
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	line := summary.line()
	fmt.Println(line)
	if p := os.Getenv("FARRO_CRASH_SUMMARY"); p != "" {
		_ = os.WriteFile(p, []byte(line+"\n"), 0o644)
	}
	bins.Remove()
	tempDirs.removeAll()
	os.Exit(code)
}
