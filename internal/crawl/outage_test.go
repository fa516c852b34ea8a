package crawl

import (
	"testing"
	"time"
)

// TestOutageJudged: at the defaults a burst of failures within seconds is
// not a verdict (the domain is not judged unreachable before the streak
// lasted unreachable_after), a streak that lasted is; a crawl written
// before unreachable_after existed (0) is judged on the count alone.
func TestOutageJudged(t *testing.T) {
	t.Parallel()
	c := New("o")
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		after   time.Duration
		streak  int
		elapsed time.Duration
		want    bool
	}{
		{DefaultUnreachableAfter, 3, 6 * time.Second, false},
		{DefaultUnreachableAfter, 50, 29 * time.Minute, false},
		{DefaultUnreachableAfter, 2, time.Hour, false},
		{DefaultUnreachableAfter, 3, DefaultUnreachableAfter, true},
		{0, 3, 0, true},
		{0, 2, time.Hour, false},
	}
	for _, tc := range cases {
		c.UnreachableAfter = Duration(tc.after)
		if got := c.OutageJudged(tc.streak, t0, t0.Add(tc.elapsed)); got != tc.want {
			t.Errorf("unreachable_after %s, %d failures over %s: judged %v, want %v", tc.after, tc.streak, tc.elapsed, got, tc.want)
		}
	}
	if d := New("d"); d.UnreachableAfter.D() != DefaultUnreachableAfter {
		t.Errorf("a new crawl's unreachable_after = %s, want %s", d.UnreachableAfter.D(), DefaultUnreachableAfter)
	}
}
