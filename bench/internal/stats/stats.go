// Package stats has the few statistics the benchmark reports: medians and
// percentiles (nearest rank).
package stats

import (
	"math/rand/v2"
	"sort"
	"time"
)

// Median of xs (0 for none).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Percentile p (0..100) of ds by nearest rank (0 for none).
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(p/100*float64(len(s))+0.999999) - 1
	if rank < 0 {
		rank = 0
	}
	if rank >= len(s) {
		rank = len(s) - 1
	}
	return s[rank]
}

// Ms converts a duration to float milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Latency is a p50/p99 pair over N samples.
type Latency struct {
	N        int
	P50, P99 time.Duration
}

// Lat computes a Latency.
func Lat(ds []time.Duration) Latency {
	return Latency{N: len(ds), P50: Percentile(ds, 50), P99: Percentile(ds, 99)}
}

// ProbeGap is the pause between two latency probes: 150 ms plus up to
// 100 ms of jitter, so that every system's queue is idle and its fetch
// cooldowns and notification limiters (River: one insert notification per
// FetchCooldown, 100 ms by default) have expired when the next job comes,
// and probes do not lock onto a poller's phase.
func ProbeGap() time.Duration {
	return 150*time.Millisecond + time.Duration(rand.Int64N(int64(100*time.Millisecond)))
}
