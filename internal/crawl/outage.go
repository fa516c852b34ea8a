package crawl

import "time"

// DefaultUnreachableAfter is how long a domain's network failures must go
// on before it is judged unreachable and rests its (long) unreachable
// cooldown: an outage shorter than this is weather, retried on the
// domain's backoff (retry.go), never a verdict.
const DefaultUnreachableAfter = 30 * time.Minute

// OutageJudged reports whether a streak of streak network failures in a
// row, the first at since, makes the domain unreachable at now: the
// streak reached UnreachableThreshold and has lasted UnreachableAfter.
func (c *Crawl) OutageJudged(streak int, since, now time.Time) bool {
	return streak >= c.UnreachableThreshold && now.Sub(since) >= c.UnreachableAfter.D()
}
