package crawl

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/farro-dev/farro/pkg/job"
)

// TestRetryDelaySchedule: the wait after the n-th consecutive failure is in
// [cap/2, cap] with cap = min(max, base*2^(n-1)): seconds first, minutes
// later, never beyond max, and jittered (not one fixed value).
func TestRetryDelaySchedule(t *testing.T) {
	base, max := 2*time.Second, 5*time.Minute
	lowest := func(n int64) int64 { return 0 }
	highest := func(n int64) int64 { return n - 1 }
	caps := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second,
		64 * time.Second, 128 * time.Second, 256 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i, c := range caps {
		streak := i + 1
		if got := RetryDelay(base, max, streak, lowest); got != c/2 {
			t.Errorf("streak %d: shortest wait %s, want %s", streak, got, c/2)
		}
		if got := RetryDelay(base, max, streak, highest); got != c {
			t.Errorf("streak %d: longest wait %s, want %s", streak, got, c)
		}
	}
	if got := RetryDelay(base, max, 1000, highest); got != max {
		t.Errorf("streak 1000: %s, want the cap %s", got, max)
	}
	if got := RetryDelay(base, max, 0, highest); got != base {
		t.Errorf("streak 0: %s, want the first wait %s", got, base)
	}
	if got := RetryDelay(0, max, 3, highest); got != 0 {
		t.Errorf("no base: %s, want 0", got)
	}
	seen := map[time.Duration]bool{}
	for i := int64(0); i < 50; i++ {
		k := i
		seen[RetryDelay(base, max, 3, func(n int64) int64 { return k * n / 50 })] = true
	}
	if len(seen) < 40 {
		t.Errorf("only %d distinct waits out of 50 draws: no jitter", len(seen))
	}
	c := New("x")
	if c.RetryBackoffD() != DefaultRetryBackoff || c.RetryBackoffMaxD() != DefaultRetryBackoffMax || c.URLAttempts() != DefaultURLAttempts {
		t.Errorf("defaults: %s %s %d", c.RetryBackoffD(), c.RetryBackoffMaxD(), c.URLAttempts())
	}
	c.RetryBackoff, c.RetryBackoffMax = Duration(time.Minute), Duration(time.Second)
	if c.RetryBackoffMaxD() != time.Minute {
		t.Errorf("max below base: %s, want the base", c.RetryBackoffMaxD())
	}
	c.RetryBackoff = Duration(-time.Second)
	if err := c.Validate(); err == nil {
		t.Error("negative retry backoff accepted")
	}
}

// TestRetryJobIDs: a retry's ID is valid, parses as its crawl's fetch job,
// differs per try and round, and gives its try back.
func TestRetryJobIDs(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range []string{"a", "x-t1", "my-crawl"} {
		for round := 0; round < 3; round++ {
			for try := 0; try < 12; try++ {
				id := RetryJobID(name, "http://example.com/p", round, try)
				if err := job.ValidateID(id); err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				if k, n, ok := ParseJobID(id); !ok || k != KindFetch || n != name {
					t.Errorf("ParseJobID(%q) = %q %q %v", id, k, n, ok)
				}
				if TryOf(id) != try {
					t.Errorf("TryOf(%q) = %d, want %d", id, TryOf(id), try)
				}
				if seen[id] {
					t.Errorf("%s made twice", id)
				}
				seen[id] = true
			}
		}
	}
	if _, _, ok := ParseJobID(FetchJobID("a", "http://example.com/") + "-t01"); ok {
		t.Error("a try with a leading zero parsed")
	}
}

// TestFailedURLs: only URLs whose last outcome is failed or killed, of the
// domain asked for.
func TestFailedURLs(t *testing.T) {
	s, err := job.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, _ := Open(s, "c")
	cr := New("c")
	cr.Seeds = []Seed{{URL: "http://a.test/"}}
	if err := st.Create(cr); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	lines := []Outcome{
		{URL: "http://a.test/1", Domain: "a.test", Outcome: OutcomeKilled},
		{URL: "http://a.test/1", Domain: "a.test", Outcome: OutcomeFetched}, // fetched since
		{URL: "http://a.test/2", Domain: "a.test", Outcome: OutcomeFailed},
		{URL: "http://a.test/3", Domain: "a.test", Outcome: OutcomeKilled},
		{URL: "http://b.test/1", Domain: "b.test", Outcome: OutcomeKilled},
		{URL: "http://a.test/4", Domain: "a.test", Outcome: OutcomeRobotsDenied},
	}
	for i := range lines {
		lines[i].Time = now
	}
	var buf []byte
	for i := range lines {
		b, _ := json.Marshal(&lines[i])
		buf = append(append(buf, b...), '\n')
	}
	if err := os.WriteFile(st.Path(OutcomesFile), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	got := func(states []string, dom string) []string {
		var out []string
		if err := st.FailedURLs(states, dom, func(o *Outcome) { out = append(out, o.URL) }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if g := got(RetryStates, ""); len(g) != 3 || g[0] != "http://a.test/2" || g[1] != "http://a.test/3" || g[2] != "http://b.test/1" {
		t.Errorf("all: %v", g)
	}
	if g := got([]string{OutcomeKilled}, "a.test"); len(g) != 1 || g[0] != "http://a.test/3" {
		t.Errorf("killed of a.test: %v", g)
	}
}
